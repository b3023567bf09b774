"""A smoke test of the load harness (benchmarks/load.py) and the throughput benchmark at a tiny size: a real
worker and daphne on a throwaway database, real sockets, the single assistant's load and then the society's (a
second daphne, whose new chats are the demo society's). The full-size benchmark is `make bench`."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from benchmarks import bench_throughput
from benchmarks.load import Stack, Tab, cpu_seconds, open_tabs, people, stack
from tests.conftest import stop_every_sweeper


@pytest.fixture
def site(django_db_blocker: Any) -> Any:
    """One stack for the whole file's checks: starting one takes a few seconds."""
    # The suite's own workers listen on the same broker: they would take the stack's runs to their database.
    stop_every_sweeper()
    with django_db_blocker.unblock(), stack(model=bench_throughput.MODEL, database_name="test_bench_load_smoke",
                                            worker_concurrency=bench_throughput.WORKER_POOL,
                                            specs=(bench_throughput.SINGLE, bench_throughput.SOCIETY)) as running:
        yield running


def _harness_checks(site: Stack) -> None:
    [person] = people(1, "harness")
    processes = site.processes()
    before = cpu_seconds(site)

    async def converse() -> tuple[dict[str, Any], dict[str, Any], Tab]:
        sender, other = await open_tabs(site, [person])
        await sender.send({"type": "assistant.ping", "id": 7})
        _, pong = await sender.wait_for(lambda frame: frame["type"] == "assistant.pong", timeout=10)
        await sender.send({"type": "assistant.send", "content": "hello", "new_chat": True})
        _, replied = await other.wait_for(lambda frame: frame["type"] == "assistant.replied", timeout=30)
        await asyncio.gather(sender.close(), other.close())
        return pong, replied, other

    pong, replied, other = asyncio.run(converse())
    after = cpu_seconds(site)
    assert pong["id"] == 7
    assert replied["run"]["status"] == "succeeded"  # seen by the tab that did not send it
    assert other.close_code == 1000
    assert len(processes["worker"]) == 1 + bench_throughput.WORKER_POOL  # the worker and its pool
    # A daphne a spec.
    assert len(processes["web"]) == 2 and len(processes["redis"]) == 1 and len(processes["postgres"]) > 1
    # One turn's CPU, counted in clock ticks (10 ms): the web process and the worker spend several; PostgreSQL,
    # Redis and this process may spend less than one here (the turns below measure them).
    spent = {kind: after[kind] - before[kind] for kind in after}
    assert spent["web"] > 0 and spent["worker"] > 0, spent

    # Without the person's session cookie the socket is refused, as a signed-out browser's is.
    stranger = dataclasses.replace(person, cookie="sessionid=not-a-session")
    with pytest.raises(InvalidStatus):
        asyncio.run(open_tabs(site, [stranger]))


def test_tabs_see_their_persons_events_and_three_people_get_every_message_answered_once_on_both_tabs(
    site: Stack,
) -> None:
    _harness_checks(site)

    result = bench_throughput.measure_on(site, turns=6, people_count=3, baseline_turns=2, idle_seconds=0.5,
                                         society="after")

    counts = result.counts
    assert counts.runs_by_status == {"succeeded": 6}
    assert counts.reply_messages == 6
    assert counts.replied_frames == 2 * 6  # each reply seen by both of its person's tabs
    # The offline model's read: a model call, the tool call, the model's reply.
    assert counts.finished_step_rows == 3 * 6
    assert counts.finished_steps_seen == 2 * 3 * 6
    assert len(result.reply_seconds) == 6 and all(seconds > 0 for seconds in result.reply_seconds)
    assert result.turns_per_second > 0
    # Every kind of process did work for the turns, and the baseline's turns were measured too.
    assert all(result.cpu_per_turn[kind] > 0 for kind in ("web", "worker", "postgres"))
    assert len(result.baseline_seconds_per_turn) == 2
    assert result.shape is not None and (result.shape.runs_per_turn, result.shape.model_calls_per_turn) == (1, 2)

    # The same load under the society: a read is plainly the reader's (the member with least authority), so each
    # message's run becomes the reader's, with no model call of the orchestrator's: one run and two calls a turn.
    society = result.society
    assert society is not None and society.spec == bench_throughput.SOCIETY
    assert society.counts.runs_by_status == {"succeeded": 6} and society.counts.member_runs == 0
    assert society.counts.reply_messages == 6 and society.counts.replied_frames == 2 * 6
    assert society.counts.finished_steps_seen == 2 * society.counts.finished_step_rows
    assert society.shape is not None and society.shape.routed_turns == 6
    assert (society.shape.runs_per_turn, society.shape.model_calls_per_turn) == (1, 2)
    assert society.turns_per_second > 0 and len(society.reply_seconds) == 6
    bench_throughput.report(result)  # prints both, with the ratio
