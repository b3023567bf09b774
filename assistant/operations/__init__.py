"""Operations: whether the assistant is up and ready — `/healthz`, the sweeper's heartbeat and each worker's
tools (`health.py`), and what a worker loads before its first turn (`warmup.py`)."""
