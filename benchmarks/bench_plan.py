"""What planning costs a turn: a request of three steps that the model plans first (the planning tool's call,
its plan revision row and events, and each step's status following the tool calls) against the same three
tool calls made unplanned — both from `chat_send` to the `assistant.replied` event through the real worker,
broker, database and channel layer, with an instantly answering scripted model.

The two kinds of turn alternate in short blocks in one sitting, each beside the bare cost of the three calls.
Reported: the extra time of a planned turn, and that as a share of a plain turn's own overhead.
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

from benchmarks.bench_turn import _time_turns, interleaved_blocks, signed_in_person

ROUNDS = 6
TURNS_PER_BLOCK = 8


def main() -> None:
    from benchmarks.load import celery_worker, clear_leftovers, throwaway_database
    from tracker.models import Project

    clear_leftovers()
    with throwaway_database("bench_plan") as database_url, tempfile.TemporaryDirectory() as scratch:
        user, sent_from = signed_in_person()
        home = Project.objects.create(owner=user, name="Home")
        calls = [
            {"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "Benchmark task"}},
            {"name": "tracker_task_list", "arguments": {"search": "Benchmark"}},
            {"name": "tracker_project_stats", "arguments": {"pk": home.pk}},
        ]
        steps = [{"do": f"Step {n}", "tool": call["name"]} for n, call in enumerate(calls, start=1)]
        plain, planned = Path(scratch) / "plain.json", Path(scratch) / "planned.json"
        plain.write_text(json.dumps([{"tool_calls": calls}, {"text": "Done."}]))
        planned.write_text(json.dumps([{"tool_calls": [{"name": "assistant_plan", "arguments": {"steps": steps}}]},
                                       {"tool_calls": calls}, {"text": "Done."}]))
        with celery_worker({**os.environ, "DATABASE_URL": database_url}):
            figures = interleaved_blocks(
                lambda warmup: _block(user, calls, sent_from, f"scripted:{plain}", warmup),
                lambda warmup: _block(user, calls, sent_from, f"scripted:{planned}", warmup),
                names=("unplanned", "planned"), rounds=ROUNDS)
    _report(*figures)


def _block(user: Any, calls: list[dict[str, Any]], sent_from: Any, model: str, warmup: int
           ) -> tuple[list[float], list[float]]:
    # Each run keeps the model it was sent with: the block's own script.
    with override_settings(ASSISTANT={**settings.ASSISTANT, "MODEL": model, "SPEC": "default",
                                      "RUNS_PER_MINUTE": 10_000}):
        return asyncio.run(_time_turns(user, calls, sent_from, runs=TURNS_PER_BLOCK, warmup=warmup,
                                       print_phases=False))


def _report(plain: list[float], planned: list[float], bare: list[float], shares: list[float]) -> None:
    plain_p50, planned_p50, bare_p50 = (statistics.median(values) for values in (plain, planned, bare))
    overhead, extra = plain_p50 - bare_p50, planned_p50 - plain_p50
    print(f"unplanned, 3 tool calls ({len(plain)} turns):   p50 {plain_p50:.1f} ms")
    print(f"planned first, 3 tool calls ({len(planned)} turns): p50 {planned_p50:.1f} ms")
    print(f"the same 3 tool calls in one process:   p50 {bare_p50:.1f} ms")
    print(f"planning adds {extra:.1f} ms a turn: {extra / overhead:.2f}× a plain turn's own overhead of "
          f"{overhead:.1f} ms (rounds {min(shares):.2f}–{max(shares):.2f})")
