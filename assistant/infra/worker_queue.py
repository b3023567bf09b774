"""The port through which the assistant hands work to a worker, so that its domain never imports Celery's tasks.

The domain says what to send (a run's turn, an owner's memory index); the adapter says how. The app connects
the Celery adapter (assistant/tasks.py) when it is ready, in every process; a test may connect another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction


@dataclass(frozen=True)
class WorkerQueue:
    """How each kind of work reaches a worker. Each sends at once: callers decide when (most, after commit)."""

    #: A run's turn, with what it was asked (`{"question", "embedder"}`) when known; says why when it cannot.
    run_turn: Callable[[int, dict[str, Any] | None], Any]
    #: A run's turn put back on the queue (a lost run, or one whose members ended), as the sweeper does.
    run_turn_again: Callable[[int], Any]
    #: Build one owner's memory index: `(owner_id=, spec=, embedder=, dims=)`.
    memory_index_build: Callable[..., Any]
    #: Drop the memory indexes an owner no longer has memories in: `(owner_id=)`.
    memory_index_drop_empty: Callable[..., Any]


_connected: list[WorkerQueue] = []


def worker_queue_connect(queue: WorkerQueue) -> None:
    """Send the assistant's work through `queue` from now on (the app's ready() connects Celery's)."""
    _connected[:] = [queue]


def worker_queue() -> WorkerQueue:
    if not _connected:
        raise ImproperlyConfigured('No worker queue is connected: is "assistant" in INSTALLED_APPS and the app '
                                   "registry ready?")
    return _connected[0]


def run_enqueue(run_id: int, asked: dict[str, Any] | None = None) -> None:
    """Hand the run to a worker once the caller's transaction commits (never before: a worker must find the
    row). `asked` ({"question", "embedder"}) lets the worker start embedding the question at once."""
    transaction.on_commit(lambda: worker_queue().run_turn(run_id, asked))
