"""The command lines of the site's two processes as `make run` starts them; the load benchmarks start the same."""

from __future__ import annotations


def worker_command(
    python: str, *, hostname: str = "worker@%h", loglevel: str = "INFO", concurrency: int = 2
) -> list[str]:
    """The Celery worker: a prefork pool of `concurrency` processes."""
    # One local worker has no neighbours to synchronise with; skipping that saves a second at start.
    return [python, "-m", "celery", "-A", "config", "worker", "--loglevel", loglevel, "--concurrency", str(concurrency),
            "--hostname", hostname, "--without-mingle", "--without-gossip"]


def daphne_command(python: str, *, host: str, port: int) -> list[str]:
    """daphne serving the site's HTTP pages and its websocket, with daphne's default limits; through
    `devstack.daphne`, so that a request line too long for daphne is answered 414 rather than dropped
    (the module keeps daphne's name, so a process list still shows which process is the site's daphne)."""
    return [python, "-m", "devstack.daphne", "-b", host, "-p", str(port), "config.asgi:application"]
