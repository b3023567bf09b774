"""What one level of delegation costs: a turn in which the site's orchestrator hands the work to its clerk, who
makes three tool calls and answers, against the same three tool calls made by the single assistant in one
run — both from `chat_send` to the `assistant.replied` event, through the real worker, broker, database
and channel layer, with an instantly answering scripted model (one script, a list per spec).

The two kinds of turn alternate in short blocks in one sitting, each block beside the bare cost of the same
three calls. The delegated turn does all the plain one does, plus a model call to ask the member and one
to answer after it, the member's own run (its row, claim, context, steps and end, filed in its profile)
and the asker's pause and wake-up. Goal: the extra cost of one level is no more than one plain turn's own
overhead (its time minus the bare calls): a ratio ≤ 1.0.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import override_settings

from benchmarks import percentile
from benchmarks.bench_turn import _time_turns, interleaved_blocks, signed_in_person

ROUNDS = 6
TURNS_PER_BLOCK = 8
GOAL_RATIO = 1.0


def main() -> None:
    from benchmarks.load import celery_worker, clear_leftovers, throwaway_database
    from tracker.models import Project

    clear_leftovers()
    with throwaway_database("bench_delegation") as database_url, tempfile.TemporaryDirectory() as scratch:
        user, sent_from = signed_in_person()
        home = Project.objects.create(owner=user, name="Home")
        # Three calls the clerk of the site's demo society may make (config/settings.py).
        calls = [
            {"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "Benchmark task"}},
            {"name": "tracker_task_list", "arguments": {"search": "Benchmark"}},
            {"name": "tracker_project_list", "arguments": {}},
        ]
        script = Path(scratch) / "delegation.json"
        script.write_text(json.dumps({
            "default": [{"tool_calls": calls}, {"text": "Done."}],
            "orchestrator": [{"tool_calls": [{"name": "ask_clerk", "arguments": {
                "task": "Add the task 'Benchmark task' to Home, find it, and list my projects."}}]},
                {"text": "Done."}],
            "clerk": [{"tool_calls": calls}, {"text": "Done."}],
        }))
        model = f"scripted:{script}"
        # A member's run is started by the worker under its member's settings: the worker's model is the script.
        with celery_worker({**os.environ, "DATABASE_URL": database_url, "ASSISTANT_MODEL": model}), \
                override_settings(ASSISTANT={**settings.ASSISTANT, "MODEL": model, "RUNS_PER_MINUTE": 10_000}):
            plain, delegated, bare, ratios = interleaved_blocks(
                lambda warmup: _block(user, calls, sent_from, "default", warmup),
                lambda warmup: _block(user, calls, sent_from, "orchestrator", warmup),
                names=("plain", "delegated"), rounds=ROUNDS)
    _report(plain, delegated, bare, ratios)


def _block(user: Any, calls: list[dict[str, Any]], sent_from: Any, spec: str, warmup: int
           ) -> tuple[list[float], list[float]]:
    return asyncio.run(_time_turns(user, calls, sent_from, runs=TURNS_PER_BLOCK, warmup=warmup,
                                   print_phases=False, chat_spec=spec))


def _report(plain: list[float], delegated: list[float], bare: list[float], ratios: list[float]) -> None:
    plain_p50, delegated_p50, bare_p50 = (statistics.median(values) for values in (plain, delegated, bare))
    overhead, extra = plain_p50 - bare_p50, delegated_p50 - plain_p50
    ratio = extra / overhead
    print(f"plain turn, 3 tool calls ({len(plain)} turns):        p50 {plain_p50:.1f} ms, "
          f"p95 {percentile(plain, 0.95):.1f} ms")
    print(f"orchestrator → clerk → 3 tool calls ({len(delegated)} turns): p50 {delegated_p50:.1f} ms, "
          f"p95 {percentile(delegated, 0.95):.1f} ms")
    print(f"the same 3 tool calls in one process:         p50 {bare_p50:.1f} ms")
    print(f"a plain turn's own overhead {overhead:.1f} ms; one level of delegation adds {extra:.1f} ms: "
          f"{ratio:.2f}× a plain turn's overhead (rounds {min(ratios):.2f}–{max(ratios):.2f}); "
          f"goal ≤ {GOAL_RATIO:.1f}×: {'met' if ratio <= GOAL_RATIO else 'NOT met'}")
