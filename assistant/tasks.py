"""Celery at the edge: the assistant's tasks, the run sweeper a worker runs, and the worker's set-up, each adapting
Celery to the domain. Nothing of the domain imports this module: it sends work through the worker queue
(assistant/infra/worker_queue.py), which `worker_queue_connect_celery()` connects to these tasks."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from typing import Any

from celery import bootsteps, shared_task
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)
from django.db import close_old_connections

from assistant.checks import celery_app_problem
from assistant.conf import assistant_settings
from assistant.infra.worker_queue import WorkerQueue, worker_queue_connect
from assistant.memory import store as memory
from assistant.operations.health import WorkerTools, record_sweeper_heartbeat
from assistant.operations.warmup import warm_up
from assistant.runs.lease import lease_claim, new_holder
from assistant.tracing import flush as send_buffered_spans
from assistant.turn import loop
from assistant.turn.sweeper import sweep_runs

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
    return loop.run_turn(run_id, holder=new_holder(), claim=lease_claim, asked=asked, enqueue=_enqueue_now)


def _enqueue_now(run_id: int) -> None:
    # Outside any transaction (the turn committed what it started): a worker may take it at once.
    run_turn.delay(run_id)


def _send_turn(run_id: int, asked: dict[str, Any] | None) -> None:
    try:
        run_turn.delay(run_id, asked)
    except Exception:
        # The broker's own error says only "connection refused"; when the cause is the project's wiring, say it.
        problem = celery_app_problem()
        if problem is not None:
            logger.error("Run %s was not sent to a worker: %s %s", run_id, *problem)
        raise


def worker_queue_connect_celery() -> None:
    """Send the assistant's work to Celery's workers through these tasks (the app's ready() calls this)."""
    worker_queue_connect(WorkerQueue(
        run_turn=_send_turn, run_turn_again=run_turn.delay,
        memory_index_build=memory_index_build.delay, memory_index_drop_empty=memory_index_drop_empty.delay,
    ))


# Delivered at least once like a turn: a second delivery finds the index built and does nothing.
@shared_task(name="assistant.memory_index_build", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def memory_index_build(owner_id: int, spec: str, embedder: str, dims: int) -> str:
    """Build one owner's memory index (see assistant.memory.store), once their memories are too many to scan."""
    return memory.memory_index_build(owner_id=owner_id, spec=spec, embedder=embedder, dims=dims)


@shared_task(name="assistant.memory_index_drop_empty", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def memory_index_drop_empty(owner_id: int) -> list[str]:
    """Drop an owner's memory indexes that nothing is in any more (they cleared their memories)."""
    return memory.memory_index_drop_empty(owner_id=owner_id)

class RunSweeper(bootsteps.StartStopStep):
    """Every few seconds, in each worker's main process: re-enqueue runs whose worker died, end runs
    stuck past their time. No separate scheduler process is needed."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.timer_ref: Any = None
        self.tools: Any = None

    def start(self, worker: Any) -> None:
        # The tools this worker's code declares now, which it offers until it stops: said at once, so that
        # `manage.py check` and /healthz can compare them before the first sweep.
        self.tools = WorkerTools(worker.app.main or "yourproject")
        self.say_tools()
        interval = float(assistant_settings.SWEEP_INTERVAL_SECONDS)
        self.timer_ref = worker.timer.call_repeatedly(interval, self.sweep, priority=10)

    def stop(self, worker: Any) -> None:
        if self.timer_ref is not None:
            self.timer_ref.cancel()
            self.timer_ref = None
        if self.tools is not None:
            try:
                self.tools.stop()
            except Exception:  # its entry then lapses with the heartbeat
                logger.warning("Could not withdraw this worker's tools from Redis", exc_info=True)

    def say_tools(self) -> None:
        try:
            self.tools.sweep()
        except Exception:  # Redis is out of reach: the next sweep says it
            logger.warning("Could not record this worker's tools in Redis", exc_info=True)

    def sweep(self) -> None:
        try:
            record_sweeper_heartbeat()
        except Exception:  # Redis is out of reach: the sweep itself needs only the database
            logger.warning("Could not record the sweeper's heartbeat in Redis", exc_info=True)
        self.say_tools()
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


# What the main process loaded, said once the worker is ready: Celery sets up its logging only after
# `worker_init`, so a line logged there is lost in a project with no LOGGING of its own.
_warmed_up: list[Any] = []


@worker_init.connect
def _load_model_and_embedder(sender: Any, **kwargs: Any) -> None:
    # In the worker's main process, before it forks its pool: the SDK modules and the embedder's weights are
    # loaded once and shared by every pool process (a pool process must also report itself up within
    # Celery's `worker_proc_alive_timeout`, 4 s, which a slow SDK import could overrun). With another pool
    # (threads, eventlet, gevent: no `worker_process_init`) this process runs the turns itself, so it builds
    # the clients too.
    _warmed_up.append(warm_up(build_clients=not _forks_its_pool(sender)))


@worker_ready.connect
def _say_what_was_loaded(sender: Any, **kwargs: Any) -> None:
    if _warmed_up:
        logger.info("Worker ready for its first turn: loaded %s", _warmed_up.pop().describe())


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
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    close_old_connections()


@worker_init.connect
def _no_database_pool_across_forks(sender: Any, **kwargs: Any) -> None:
    # The main process's own database work (the run sweeper) opens its connection pool when the project
    # configures one (DATABASES' "pool" option), and Celery forks a new pool process whenever one exits (a
    # crash, a hard time limit). A child must not inherit that pool: its connections' sockets would be
    # shared with the parent, its lock might be held by one of the parent's pool threads (which a fork does
    # not copy), and closing those connections in the child, as Celery's Django support does, ends the
    # parent's sessions on the server. So the main process closes its pools just before each fork; its
    # next sweep opens a new one. Not for pools that run the tasks in this process (threads, eventlet, ...).
    global _closes_pools_before_fork
    if _forks_its_pool(sender) and not _closes_pools_before_fork:
        os.register_at_fork(before=_close_database_pools)
        _closes_pools_before_fork = True


_closes_pools_before_fork = False


def _close_database_pools() -> None:
    from django.db import connections

    for alias in connections:
        connection = connections[alias]
        if not connection.settings_dict.get("OPTIONS", {}).get("pool"):
            continue
        # A connection this thread still holds stays usable, and is closed when it goes back; the child
        # lets go of its copy without touching the socket (_fresh_connections).
        try:
            connection.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's backend (Django 5.1+)
        except Exception:  # a failing fork hook must not stop the fork: the new pool process is still made
            logger.warning("Could not close the %r database pool before a fork", alias, exc_info=True)


@worker_process_shutdown.connect
@worker_shutdown.connect
def _send_the_spans_held(**kwargs: Any) -> None:
    # A pool process ends without Python's exit handlers, which is where OpenTelemetry sends what its batch still
    # holds: a worker stopped for a deploy would lose its last runs' spans. Nothing when tracing is off.
    send_buffered_spans()


@worker_process_init.connect
def _fresh_connections(**kwargs: Any) -> None:
    # A forked pool process must not use the parent's database sockets, nor close them the usual way: that
    # asks the server to end the session, which the parent is still using. So, as Celery's Django support
    # does, the child closes its copy of the socket first, and only then lets the connection go.
    from django.db import DatabaseError, connections

    for connection in connections.all(initialized_only=True):
        inherited = connection.connection
        if inherited is not None and not inherited.closed:
            # A socket already lost or closed holds nothing of the parent's to protect.
            with contextlib.suppress(OSError, DatabaseError), connection.wrap_database_errors:
                os.close(inherited.fileno())
        connection.close()

    # Each pool process builds its own clients (their connection pools are its own) before its first turn.
    logger.info("Worker process ready for its first turn: built %s", warm_up(build_clients=True).describe())
