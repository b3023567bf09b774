import os

# One BLAS thread per process, set before NumPy loads. Web and worker processes get their parallelism
# from being several processes; BLAS helper threads spin-wait between the embedder's small matrix
# products and starve the other processes on the cores. Measured on 2 cores: a turn's median latency
# fell from 242 ms to 88 ms. An explicit setting in the environment still wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from config.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
