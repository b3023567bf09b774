"""A smoke test of the evals benchmark at a tiny size: a real worker on a throwaway database, the offline
model, one case per demo request, one round of each kind. The full size is `make bench`."""

from __future__ import annotations

import time
from typing import Any

from benchmarks import bench_evals
from tests.conftest import stop_every_sweeper


def test_every_case_is_replayed_and_run_live_and_each_block_is_timed(django_db_blocker: Any) -> None:
    # The suite's own workers listen on the same broker: they would take the benchmark's runs to their database.
    stop_every_sweeper()
    started = time.monotonic()
    with django_db_blocker.unblock():
        result = bench_evals.measure(rounds=1, copies=1, database_name="test_bench_evals_smoke")
    took = time.monotonic() - started

    # measure() itself fails when a replayed case does not pass, a replay changed the site or a live run failed.
    assert result.cases == len(bench_evals.QUESTIONS) and not result.failed
    for kind in bench_evals.KINDS:
        assert len(result.blocks[kind]) == 1 and 0 < result.blocks[kind][0] < took, kind
        assert len(result.case_ms[kind]) == result.cases, kind  # every case timed, once
        assert all(0 < value < took * 1000 for value in result.case_ms[kind]), kind
        assert result.worker_cpu[kind][0] > 0 and result.start_cpu[kind][0] > 0, kind
    assert len(result.ratios()) == 1
