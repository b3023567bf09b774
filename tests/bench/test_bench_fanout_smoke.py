"""A smoke test of the fan-out benchmark at a tiny size: a real worker and daphne on a throwaway database,
real sockets, two producer processes. The full-size benchmark is `make bench`."""

from __future__ import annotations

import time
from typing import Any

from benchmarks import bench_fanout
from tests.conftest import stop_every_sweeper


def test_two_people_with_two_tabs_each_get_every_step_and_the_reload_finds_nothing_missing(
    django_db_blocker: Any,
) -> None:
    # The suite's own workers listen on the same broker: they would take the benchmark's runs to their database.
    stop_every_sweeper()
    started = time.monotonic()
    with django_db_blocker.unblock():
        result = bench_fanout.measure(people_count=2, runs_per_person=1, rates=[40], seconds=1,
                                      baseline_seconds=0.5, database_name="test_bench_fanout_smoke")
    # Each latency is a part of the measurement, which took this long: what clocks mixed up would break.
    took = time.monotonic() - started

    end_to_end, baseline, delivery = result.phases
    assert end_to_end.extra["statuses"] == {"succeeded": 2}
    assert end_to_end.extra["finished_steps_per_run"] == 22  # three model calls and 19 reads
    assert end_to_end.offered == end_to_end.delivered == 2 * 22 * 2  # every finished step on both tabs
    assert (baseline.extra["people"], baseline.offered) == (1, 50 * 2)
    assert delivery.offered == delivery.delivered == 40 * 2
    for phase in result.phases:
        assert (phase.lost_live, phase.gaps, phase.unseen, phase.lost_after_reload) == (0, 0, 0, 0), phase.name
        assert len(phase.latencies) == phase.delivered and all(0 < seconds < took for seconds in phase.latencies)
    assert result.publish_round_trip
