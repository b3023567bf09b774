"""A smoke test of the MCP benchmark at a tiny size: daphne on a throwaway database serving the endpoint and
the baseline server, the official SDK's client, the executor in this process. The full size is `make bench`."""

from __future__ import annotations

import time
from typing import Any

from benchmarks import bench_mcp


def test_each_kind_is_timed_the_mcp_answer_is_the_executors_and_every_mcp_call_is_one_run(
    django_db_blocker: Any,
) -> None:
    started = time.monotonic()
    with django_db_blocker.unblock():
        result = bench_mcp.measure(rounds=2, calls_per_block=2, database_name="test_bench_mcp_smoke")
    took_ms = (time.monotonic() - started) * 1000

    # measure() itself fails when an MCP answer differs from the executor's.
    assert result.mcp_calls == (5 + 2) + (2 + 2) + 1  # the first round warms up longer; one call in process
    assert result.mcp_runs == result.mcp_calls
    for kind in bench_mcp.KINDS:
        assert [len(block) for block in result.rounds[kind]] == [2, 2], kind
        assert all(0 < value < took_ms for value in result.times(kind)), kind
    assert len(result.ratios("mcp", "executor")) == 2
    assert result.commits >= 1 and result.queries > result.commits  # the call's rows were written
