"""Warm-up of a worker: what the configured model and embedder load on first use (a provider's SDK takes a
second or more to import on a small machine, the local embedder's weights a third of one) is loaded when the
worker starts, so that no person's turn waits for it.

The worker's main process loads the modules and weights once, before it forks its pool (the pool processes
share them); each pool process then builds its own clients (`assistant/tasks.py` wires both to Celery's
signals). A warm-up never stops a worker: what fails here is logged, and fails again, readably, in the turn.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

# The turn's own modules (the loop, the tools' executor, the reply's Markdown: about a hundred modules, 60 ms
# here) load with this module, which a worker's main process imports before it forks its pool: the pool
# processes share them, and no first turn imports them.
import assistant.runs.lease  # noqa: F401
import assistant.turn.loop  # noqa: F401
from assistant.embeddings import get_embedder
from assistant.llm import get_model
from assistant.llm.failover import FailoverModel
from assistant.llm.remote import RemoteModel

logger = logging.getLogger(__name__)


@dataclass
class WarmUp:
    """What a warm-up loaded, for the log line and the tests."""

    model: str = ""
    embedder: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        done = f"model {self.model or '?'}, embedder {self.embedder or '?'} in {self.seconds:.2f} s"
        return done + (f" ({'; '.join(self.problems)})" if self.problems else "")


def warm_up(*, build_clients: bool) -> WarmUp:
    """Build the configured model and embedder and load what their first use would load.

    With `build_clients` False (a process about to fork), only modules and weights are loaded: an SDK
    client's connection pool belongs to the process that uses it. With it True, each remote model's
    client is built too. Makes no network call.
    """
    started = time.perf_counter()
    report = WarmUp()
    try:
        model = get_model()
        report.model = model.name
        chain = model.models if isinstance(model, FailoverModel) else [model]
        for entry in chain:
            if isinstance(entry, RemoteModel) and build_clients:
                entry.prepare()
            elif isinstance(entry, RemoteModel):
                entry.load_sdk()
    except Exception as exc:  # a misconfigured model fails its turns with a readable error; the worker runs on
        report.problems.append(f"model: {exc}")
    try:
        embedder = get_embedder()
        report.embedder = embedder.name
        prepare = getattr(embedder, "prepare", None)
        if prepare is not None:
            prepare()
    except Exception as exc:  # recall degrades to "no memory this turn"; the worker runs on
        report.problems.append(f"embedder: {exc}")
    report.seconds = time.perf_counter() - started
    return report
