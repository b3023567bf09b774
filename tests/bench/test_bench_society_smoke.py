"""A smoke test of the society benchmark at its smallest size: one repetition of the demo's requests through the
socket, under the society and the single assistant, on a real worker and daphne. The full size is `make bench`."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from benchmarks import bench_society
from tests.conftest import stop_every_sweeper


def test_each_request_is_measured_from_its_rows_for_both_specs(django_db_blocker: Any,
                                                               capsys: Any) -> None:
    # The suite's own workers listen on the same broker: they would take the benchmark's runs to their database.
    stop_every_sweeper()
    with django_db_blocker.unblock():
        # measure() itself fails when a request did not do its work (a run that did not succeed, no effect).
        found = bench_society.measure(1, database_name="test_bench_society_smoke")
    single, society = found[bench_society.SINGLE][0], found[bench_society.SOCIETY][0]
    assert [row.request for row in single] == [row.request for row in society] == [
        name for name, _ in bench_society.REQUESTS]
    # A request of one member is plainly that member's; the Garden request needs three.
    assert [bool(row.routed) for row in society] == [True, True, False, True, True]
    for alone, ours in zip(single, society, strict=True):
        # The single assistant works alone.
        assert (alone.runs, alone.run_specs, alone.delegations) == (1, [bench_society.SINGLE], 0), alone
        if ours.routed:
            # The orchestrator's run became its member's: one run, as many model calls as the single assistant.
            assert (ours.runs, ours.delegations, ours.model_calls) == (1, 0, alone.model_calls), ours
            assert ours.run_specs[0] in settings.ASSISTANT["SPECS"][bench_society.SOCIETY]["delegates"], ours
        else:
            assert ours.runs >= 2 and ours.run_specs[0] == bench_society.SOCIETY and ours.delegations >= 1, ours
        for row in (alone, ours):
            assert row.model_calls == row.steps_by_kind["model_call"] and row.steps == sum(row.steps_by_kind.values())
            assert row.status == "succeeded" and row.seconds > 0
    # The delete waited for one approval, given through the socket, in both.
    assert [row.approvals for row in single] == [row.approvals for row in society] == [0, 0, 0, 1, 0]
    bench_society.report(found)
    printed = capsys.readouterr().out
    assert all(name in printed for name, _ in bench_society.REQUESTS) and "difference" in printed
