"""A whole turn's overhead: from `chat_send` to the `assistant.replied` event, with an instantly answering
scripted model and three tool calls, against the bare cost of the same three tool calls in one process.

The turn runs in a real Celery worker on the real broker, database and channel layer, in a throwaway
database. Target: the assistant's own overhead (turn median minus the three calls' median) ≤ 50 ms.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from benchmarks import percentile

RUNS = 40
WARMUP = 5
TARGET_OVERHEAD_MS = 50.0
PAUSE_BETWEEN_TURNS_SECONDS = 0.3


async def _time_turns(user: Any, calls: list[dict[str, Any]], sent_from: Any, *, runs: int = RUNS,
                      warmup: int = WARMUP, print_phases: bool = True, chat_spec: str = "default",
                      ) -> tuple[list[float], list[float]]:
    """Turns and bare calls, alternating, so both see the same state of a shared, noisy machine. Both act
    with a signed-in session, as a message sent from the socket does, each in a new chat under
    `chat_spec` (the single assistant by default). (`bench_peer` and `bench_delegation` call this in
    short blocks, interleaved with what they compare it with.)"""
    from channels.db import database_sync_to_async
    from channels.layers import get_channel_layer

    from assistant.conversation.services import chat_send
    from assistant.live.events import user_group
    from assistant.models import AgentRun

    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(user_group(user.pk), channel)

    def send() -> int:
        # A new chat as the panel's "New chat" starts one: with its first message, in the send's transaction.
        return chat_send(user=user, content="benchmark turn", new_chat=True, sent_from=sent_from).run.pk

    turns, bare = [], []
    phases: dict[str, list[float]] = {
        "send → run row written": [], "run row → send returned": [], "send returned → worker claims": [],
        "claim → first step": [], "first → last step": [], "last step → run finished": [],
        "finished → replied received": [],
    }
    # New chats are under `chat_spec` while these turns run.
    with override_settings(ASSISTANT={**settings.ASSISTANT, "SPEC": chat_spec}):
        for number in range(warmup + runs):
            sent_at = timezone.now()
            started = time.perf_counter()
            run_id = await database_sync_to_async(send)()
            returned_at = timezone.now()
            event: dict[str, Any] = {}
            done = {"assistant.replied", "assistant.reply_failed"}
            while event.get("run_id") != run_id or event.get("type") not in done:
                message = await asyncio.wait_for(layer.receive(channel), timeout=30)
                event = message["events"][-1]
            if event["type"] != "assistant.replied":
                raise RuntimeError(f"run {run_id} failed: {event.get('error')}")
            elapsed = (time.perf_counter() - started) * 1000
            received = timezone.now()
            # A person reads the reply before writing again; the worker's after-reply work (memory, registry)
            # would otherwise compete for the two cores with what is measured next.
            await asyncio.sleep(PAUSE_BETWEEN_TURNS_SECONDS)
            bare_elapsed = await database_sync_to_async(_time_bare_calls)(user, calls, sent_from)
            if number < warmup:
                continue
            turns.append(elapsed)
            bare.append(bare_elapsed)
            run = await database_sync_to_async(AgentRun.objects.get)(pk=run_id)
            steps = await database_sync_to_async(lambda run=run: list(run.steps.order_by("seq")))()

            def ms(later: Any, earlier: Any) -> float:
                return float((later - earlier).total_seconds() * 1000)

            phases["send → run row written"].append(ms(run.created_at, sent_at))
            phases["run row → send returned"].append(ms(returned_at, run.created_at))
            phases["send returned → worker claims"].append(ms(run.started_at, returned_at))
            phases["claim → first step"].append(ms(steps[0].created_at, run.started_at))
            phases["first → last step"].append(ms(steps[-1].created_at, steps[0].created_at))
            phases["last step → run finished"].append(ms(run.finished_at, steps[-1].created_at))
            phases["finished → replied received"].append(ms(received, run.finished_at))
    await layer.group_discard(user_group(user.pk), channel)
    # The sending thread keeps its connection between turns, as a server's would; the throwaway
    # database can only be dropped once it is closed.
    await database_sync_to_async(lambda: connection.close())()
    for phase, values in phases.items() if print_phases else ():
        print(f"  {phase:<30} p50 {statistics.median(values):6.1f} ms")
    return turns, bare


def _time_bare_calls(user: Any, calls: list[dict[str, Any]], sent_from: Any) -> float:
    """The same tool calls, made directly in this process: what the turn costs without the assistant."""
    from assistant.tools import execute_tool

    started = time.perf_counter()
    for call in calls:
        outcome = execute_tool(user, call["name"], call["arguments"], spec="default", sent_from=sent_from)
        assert outcome.status in {"done", "data"}, outcome
    return (time.perf_counter() - started) * 1000


Block = Callable[[int], tuple[list[float], list[float]]]


def interleaved_blocks(base: Block, other: Block, *, names: tuple[str, str], rounds: int = 6
                       ) -> tuple[list[float], list[float], list[float], list[float]]:
    """Blocks of two kinds of turn, alternating for `rounds` rounds in one sitting; each block (called with
    its warm-up count) returns its turn times and the bare calls' beside them. Returns both kinds' times,
    every bare time, and each round's extra of `other` over `base` as a share of `base`'s own overhead."""
    base_times: list[float] = []
    other_times: list[float] = []
    bare: list[float] = []
    shares: list[float] = []
    for number in range(rounds):
        warmup = 3 if number == 0 else 1
        block_base, bare_base = base(warmup)
        block_other, bare_other = other(warmup)
        base_times += block_base
        other_times += block_other
        bare += bare_base + bare_other
        overhead = statistics.median(block_base) - statistics.median(bare_base + bare_other)
        shares.append((statistics.median(block_other) - statistics.median(block_base)) / overhead)
        print(f"  round {number + 1}: {names[0]} p50 {statistics.median(block_base):6.1f} ms, {names[1]} p50 "
              f"{statistics.median(block_other):6.1f} ms, extra / {names[0]} overhead {shares[-1]:.2f}", flush=True)
    return base_times, other_times, bare, shares


def signed_in_person(username: str = "bench") -> tuple[Any, Any]:
    """A new person signed in through a real session, and where their messages come from (`SentFrom`), as
    the socket passes it: their runs' tool calls go through the site's middleware with that session."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from assistant.access.authority import SentFrom

    user = get_user_model().objects.create_user(username, password="x")  # noqa: S106
    browser = Client()
    browser.force_login(user)
    return user, SentFrom(session_key=browser.session.session_key or "", client_address="127.0.0.1",
                          origin="http://127.0.0.1:8000")


@contextmanager
def three_tool_world(database_name: str) -> Iterator[tuple[Any, list[dict[str, Any]], Any, str]]:
    """A throwaway database `database_name` holding a signed-in person and their project "Home", and a scripted
    model that makes the turn's three tool calls and then answers, sent with every message while the block runs:
    yields (user, calls, sent_from, database_url); the caller starts the worker(s)."""
    from benchmarks.load import clear_leftovers, throwaway_database
    from tracker.models import Project

    clear_leftovers()
    with throwaway_database(database_name) as database_url, tempfile.TemporaryDirectory() as scratch:
        user, sent_from = signed_in_person()
        home = Project.objects.create(owner=user, name="Home")
        calls = [
            {"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "Benchmark task"}},
            {"name": "tracker_task_list", "arguments": {"search": "Benchmark"}},
            {"name": "tracker_project_stats", "arguments": {"pk": home.pk}},
        ]
        script = Path(scratch) / "three-tool-turn.json"
        script.write_text(json.dumps([{"tool_calls": calls}, {"text": "Done."}]))
        # Each run keeps the settings it was sent with, the model among them, so the worker needs no override.
        with override_settings(ASSISTANT={**settings.ASSISTANT, "MODEL": f"scripted:{script}",
                                          "RUNS_PER_MINUTE": 10_000}):
            yield user, calls, sent_from, database_url


@contextmanager
def three_tool_turns(database_name: str) -> Iterator[tuple[Any, list[dict[str, Any]], Any]]:
    """`three_tool_world` with a real worker on it: yields (user, calls, sent_from) for `_time_turns`."""
    from benchmarks.load import celery_worker

    with three_tool_world(database_name) as (user, calls, sent_from, database_url), \
            celery_worker({**os.environ, "DATABASE_URL": database_url}):
        yield user, calls, sent_from


def main() -> None:
    with three_tool_turns("bench_turn") as (user, calls, sent_from):
        turns, bare = asyncio.run(_time_turns(user, calls, sent_from))
    turn_p50, bare_p50 = statistics.median(turns), statistics.median(bare)
    overhead = turn_p50 - bare_p50
    turn_p95, bare_p95 = percentile(turns, 0.95), percentile(bare, 0.95)
    print(f"send → replied, 3 tool calls ({RUNS} runs): p50 {turn_p50:.1f} ms, p95 {turn_p95:.1f} ms")
    print(f"the same 3 tool calls in one process:        p50 {bare_p50:.1f} ms, p95 {bare_p95:.1f} ms")
    print(f"assistant overhead at the median: {overhead:.1f} ms (ratio {turn_p50 / bare_p50:.1f}×); "
          f"target ≤ {TARGET_OVERHEAD_MS:.0f} ms: {'met' if overhead <= TARGET_OVERHEAD_MS else 'NOT met'}")
