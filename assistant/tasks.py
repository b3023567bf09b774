from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery import bootsteps, shared_task
from celery.signals import task_postrun, task_prerun, worker_init, worker_process_init

logger = logging.getLogger(__name__)


@shared_task(name="assistant.health_check")
def health_check(nonce: str) -> dict[str, Any]:
    """Echoes `nonce` with where it ran, proving a worker took it from the broker.

    Never pass a secret (`HEALTH_TOKEN` above all): a worker logs every task's result at INFO, and the
    result backend keeps it for `CELERY_RESULT_EXPIRES`. A fresh random value is all a caller needs."""
    return {"nonce": nonce, "hostname": socket.gethostname(), "pid": os.getpid()}


# Acknowledged late, and put back when its worker dies, whatever the host's Celery defaults: a run whose
# worker was killed is delivered again at once rather than waiting for the sweeper.
@shared_task(name="assistant.run_turn", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def run_turn(run_id: int, asked: dict[str, Any] | None = None) -> str:
    """One turn of the assistant. Delivered at least once: the run's lease makes extra deliveries no-ops.
    `asked` (the question and the embedder to embed it with) lets the worker start on recall at once."""
    from assistant.turn.lease import lease_claim, new_holder
    from assistant.turn.loop import run_turn as work

    return work(run_id, holder=new_holder(), claim=lease_claim, asked=asked)



# Delivered at least once like a turn: a second delivery finds the index built and does nothing.
@shared_task(name="assistant.memory_index_build", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def memory_index_build(owner_id: int, spec: str, embedder: str, dims: int) -> str:
    """Build one owner's memory index (see assistant.memory), once their memories are too many to scan."""
    from assistant.memory import memory_index_build as build

    return build(owner_id=owner_id, spec=spec, embedder=embedder, dims=dims)


@shared_task(name="assistant.memory_index_drop_empty", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def memory_index_drop_empty(owner_id: int) -> list[str]:
    """Drop an owner's memory indexes that nothing is in any more (they cleared their memories)."""
    from assistant.memory import memory_index_drop_empty as drop

    return drop(owner_id=owner_id)

class RunSweeper(bootsteps.StartStopStep):
    """Every few seconds, in each worker's main process: re-enqueue runs whose worker died, end runs
    stuck past their time. No separate scheduler process is needed."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.timer_ref: Any = None

    def start(self, worker: Any) -> None:
        from assistant.conf import assistant_settings

        interval = float(assistant_settings.SWEEP_INTERVAL_SECONDS)
        self.timer_ref = worker.timer.call_repeatedly(interval, self.sweep, priority=10)

    def stop(self, worker: Any) -> None:
        if self.timer_ref is not None:
            self.timer_ref.cancel()
            self.timer_ref = None

    def sweep(self) -> None:
        from django.db import close_old_connections

        from assistant.health import record_sweeper_heartbeat
        from assistant.turn.sweeper import sweep_runs

        try:
            record_sweeper_heartbeat()
        except Exception:  # Redis is out of reach: the sweep itself needs only the database
            logger.warning("Could not record the sweeper's heartbeat in Redis", exc_info=True)
        try:
            sweep_runs()
        except Exception:  # the next sweep tries again; a sweep must never take the worker down
            logger.exception("Run sweep failed")
        finally:
            close_old_connections()


@worker_init.connect
def _add_run_sweeper(sender: Any, **kwargs: Any) -> None:
    # Whatever app the host's worker runs (no import of the host's Celery app): the worker imports its
    # tasks (autodiscover_tasks() finds this module) before it sends this signal, and reads its steps
    # right after it.
    sender.app.steps["worker"].add(RunSweeper)


@worker_init.connect
def _load_model_and_embedder(sender: Any, **kwargs: Any) -> None:
    # In the worker's main process, before it forks its pool: the SDK modules and the embedder's weights are
    # loaded once and shared by every pool process (a pool process must also report itself up within
    # Celery's `worker_proc_alive_timeout`, 4 s, which a slow SDK import could overrun). With another pool
    # (threads, eventlet, gevent: no `worker_process_init`) this process runs the turns itself, so it builds
    # the clients too.
    from assistant.warmup import warm_up

    report = warm_up(build_clients=not _forks_its_pool(sender))
    logger.info("Worker ready for its first turn: loaded %s", report.describe())


def _forks_its_pool(worker: Any) -> bool:
    # By name: importing the pool's module here would come before eventlet's or gevent's patching.
    pool = getattr(worker, "pool_cls", "prefork")
    name = pool if isinstance(pool, str) else f"{pool.__module__}:{pool.__qualname__}"
    return name in ("prefork", "celery.concurrency.prefork:TaskPool")


@task_prerun.connect
@task_postrun.connect
def _connections_as_between_requests(sender: Any = None, **kwargs: Any) -> None:
    """Around every task, what Django does around every request: drop a connection that broke or outlived
    CONN_MAX_AGE, and health-check the next one on first use. A host that lets Celery keep connections
    between tasks (CELERY_DB_REUSE_MAX) then never hands a task a connection PostgreSQL has since closed.
    Not for a task run eagerly, in its caller's thread (a host's tests): that may be inside the caller's
    transaction, whose connection must stay open (Celery's own Django support leaves eager tasks alone too)."""
    from django.db import close_old_connections

    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    close_old_connections()


@worker_process_init.connect
def _fresh_connections(**kwargs: Any) -> None:
    # A forked pool process must not share the parent's database socket.
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        connection.close()

    # Each pool process builds its own clients (their connection pools are its own) before its first turn.
    from assistant.warmup import warm_up

    logger.info("Worker process ready for its first turn: built %s", warm_up(build_clients=True).describe())
