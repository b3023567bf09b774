"""A smoke test of the load harness (benchmarks/load.py) and the throughput benchmark at a tiny size: a real
worker and daphne on a throwaway database, real sockets. The full-size benchmark is `make bench`."""

from __future__ import annotations

from typing import Any

from benchmarks import bench_throughput
from tests.conftest import stop_every_sweeper


def test_three_people_with_two_tabs_each_get_every_message_answered_once_on_both_tabs(django_db_blocker: Any) -> None:
    # The suite's own workers listen on the same broker: they would take the benchmark's runs to their database.
    stop_every_sweeper()
    with django_db_blocker.unblock():
        result = bench_throughput.measure(turns=6, people_count=3, baseline_turns=2,
                                          database_name="test_bench_load_smoke")

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
