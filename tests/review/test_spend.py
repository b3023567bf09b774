"""What staff see of what the assistant's model calls cost: each model call's cost (and cached tokens) on the
run's timeline with the run's own and its tree's, a cost column in the run list and two columns in its CSV, and the
dashboard's spend — per day, by person, by spec and by model — equal to the sums of the rows, in the same handful
of queries. With no prices set, the dashboard says so rather than showing what looks free."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from assistant.models import AgentRun, AgentStep
from tests.review.test_dashboard import DASHBOARD, RUN_LIST, day, make_run, show, staff  # noqa: F401

pytestmark = pytest.mark.django_db


def priced(run: AgentRun, *calls: tuple[str, str, int]) -> AgentRun:
    """Model calls on `run`, each `(chain entry that answered, cost, cached tokens)`; the run's cost their sum."""
    costs = []
    for seq, (provider, cost, cached) in enumerate(calls, start=100):
        AgentStep.objects.create(run=run, seq=seq, kind="model_call", result={"provider": provider, "model": provider},
                                 prompt_tokens=1000, completion_tokens=100, cached_tokens=cached, cost=Decimal(cost))
        costs.append(Decimal(cost))
    AgentRun.objects.filter(pk=run.pk).update(cost=sum(costs, Decimal(0)))
    run.refresh_from_db()
    return run


@pytest.fixture
def spent(alice: Any, bob: Any) -> dict[str, AgentRun]:
    return {
        "a1": priced(make_run(alice, on=day(2), spec="orchestrator"), ("openai:gpt-4.1-mini", "0.0040", 0),
                     ("openai:gpt-4.1-mini", "0.0020", 500)),
        "a2": priced(make_run(alice, on=day(0), spec="clerk"), ("anthropic:claude-sonnet-4-5", "0.0300", 0)),
        "b1": priced(make_run(bob, on=day(0), spec="orchestrator"), ("openai:gpt-4.1-mini", "0.0100", 0)),
        "free": make_run(bob, on=day(1), tokens=300),  # its model had no price
    }


def test_the_dashboards_spend_is_the_sum_of_the_rows_per_day_person_spec_and_model(
        staff: Client, spent: dict[str, AgentRun]) -> None:  # noqa: F811
    page = show(staff)

    assert page.figures["figure-spend"][0] == "0.0460 USD"
    per_day = page.rows("table-spend-days")
    assert per_day[day(2).isoformat()][0][0] == "0.0060 USD"
    assert per_day[day(1).isoformat()][0][0] == "—"  # nothing priced that day: not "0"
    assert per_day[day(0).isoformat()][0][0] == "0.0400 USD"
    by = {name: {who: cells[0][0] for who, cells in page.rows(f"table-spend-{name}").items()}
          for name in ("person", "spec", "model")}
    assert by["person"] == {"alice": "0.0360 USD", "bob": "0.0100 USD"}
    assert by["spec"] == {"clerk": "0.0300 USD", "orchestrator": "0.0160 USD"}
    assert by["model"] == {"anthropic:claude-sonnet-4-5": "0.0300 USD", "openai:gpt-4.1-mini": "0.0160 USD"}
    # Each sum is the rows': what the runs say they cost, and what their model calls did.
    assert sum((run.cost or Decimal(0)) for run in spent.values()) == Decimal("0.0460")
    assert sum(AgentStep.objects.filter(cost__isnull=False).values_list("cost", flat=True)) == Decimal("0.0460")


def test_with_no_price_set_the_dashboard_says_so_instead_of_zero(staff: Client, alice: Any) -> None:  # noqa: F811
    make_run(alice, on=day(0), tokens=500)
    page = staff.get(DASHBOARD).content.decode()
    assert "figure-spend" not in show(staff).figures  # no figure to follow: nothing was priced
    assert "No model call of these runs had a price: set <code>PRICES</code> to see what they cost." in page


def test_spend_costs_the_dashboard_the_same_queries_for_more_runs(
        staff: Client, alice: Any, bob: Any) -> None:  # noqa: F811
    priced(make_run(alice, on=day(0)), ("openai:gpt-4.1-mini", "0.01", 0))
    with CaptureQueriesContext(connection) as few:
        show(staff)
    for offset in range(5):
        priced(make_run(bob, on=day(offset), spec=f"spec-{offset}"), (f"local:m{offset}", "0.02", 0))
    with CaptureQueriesContext(connection) as many:
        show(staff)
    assert len(many) == len(few) <= 15, [query["sql"] for query in many]


def test_the_timeline_shows_each_calls_cost_and_the_runs(staff: Client, spent: dict[str, AgentRun]) -> None:  # noqa: F811
    page = staff.get(f"{RUN_LIST}{spent['a1'].pk}/change/").content.decode()
    assert '1000 → 100 tokens · <span class="timeline-cost">0.0040 USD</span>' in page
    assert '1000 → 100 tokens (500 cached) · <span class="timeline-cost">0.0020 USD</span>' in page
    assert '<span class="run-cost">0.0060 USD</span>' in page


def test_the_run_list_and_its_csv_carry_the_cost(staff: Client, spent: dict[str, AgentRun]) -> None:  # noqa: F811
    listed = staff.get(RUN_LIST).content.decode()
    assert '<td class="field-spent">0.0300 USD</td>' in listed and '<td class="field-spent">—</td>' in listed
    ids = [str(run.pk) for run in spent.values()]
    answer = staff.post(RUN_LIST, {"action": "export_csv", "_selected_action": ids})
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    by_id = {row["id"]: row for row in rows}
    assert (by_id[str(spent["a2"].pk)]["cost"], by_id[str(spent["a2"].pk)]["currency"]) == ("0.030000", "USD")
    assert (by_id[str(spent["free"].pk)]["cost"], by_id[str(spent["free"].pk)]["currency"]) == ("", "")


def test_a_runs_profile_entry_keeps_its_cost_and_the_profile_shows_the_windows_spend(
        staff: Client, spent: dict[str, AgentRun], alice: Any) -> None:  # noqa: F811
    from assistant.runs.profile import run_profile_entry
    from registry.models import AgentProfile

    run = spent["a1"]
    entry = run_profile_entry(run, list(run.steps.all()))
    assert (entry["cost"], entry["currency"]) == ("0.006000", "USD")
    unpriced = run_profile_entry(spent["free"], [])
    assert "cost" not in unpriced
    window = [{**entry, "timestamp": "2026-12-01T10:00:00+00:00"},
              {**unpriced, "timestamp": "2026-12-01T11:00:00+00:00"},
              {**entry, "run_id": 999, "cost": "0.0100", "timestamp": "2026-12-01T12:00:00+00:00"}]
    profile = AgentProfile.objects.create(owner=alice, spec_name="orchestrator", invocations=3, window=window)

    page = staff.get(f"/admin/registry/agentprofile/{profile.pk}/change/").content.decode()
    assert '<td data-figure="spend">0.0160 USD (0.0080 USD a run, over 2 priced runs)</td>' in page
    assert "<td>0.0060 USD</td>" in page and "<td>0.0100 USD</td>" in page
