"""The registry decides whom a spec asks: `members_ranked` orders the members a spec may hand work to by
their records for this person (or the organisation's, below the minimum sample), as docs/registry.md's rule says.
Every record here is filed through the service that files ended runs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from registry.models import AgentProfile
from registry.selectors import MIN_SAMPLE, members_ranked, profile_summary
from registry.services import profile_record_invocation

pytestmark = pytest.mark.django_db

CREATE = "tracker_task_create"
LIST = "tracker_task_list"
_run_ids = itertools.count(1)


def ran(owner: Any, spec_name: str, outcomes: str, *, intent: str | None = None) -> None:
    """File one ended run per letter, oldest first: `s` succeeded, `f` failed."""
    for letter in outcomes:
        failed = letter == "f"
        profile_record_invocation(owner=owner, spec_name=spec_name, entry={
            "run_id": next(_run_ids), "status": "error" if failed else "success", "duration_ms": 1200,
            "tool_calls": 1 if intent else 0, "tool_errors": int(failed and bool(intent)), "token_usage": 300,
            "intent": intent or "conversation", "tools_used": [intent] if intent else [],
            "failed_tools": [intent] if intent and failed else [], "error_summary": "It failed." if failed else None,
        })


def order(owner: Any, *spec_names: str, intent: str | None = None) -> list[str]:
    return [member.spec_name for member in members_ranked(owner=owner, spec_names=spec_names, intent=intent)]


def ranked(owner: Any, *spec_names: str, intent: str | None = None) -> dict[str, Any]:
    return {member.spec_name: member for member in members_ranked(owner=owner, spec_names=spec_names, intent=intent)}


def test_a_better_record_wins_once_it_has_the_minimum_sample(alice: Any) -> None:
    assert MIN_SAMPLE == 5  # as docs/registry.md's rule says
    ran(alice, "reader", "sssff")
    ran(alice, "clerk", "ssss")
    # Four out of four is not yet a record: the proven reader goes first, though declared second.
    assert order(alice, "clerk", "reader") == ["reader", "clerk"]
    assert not ranked(alice, "clerk")["clerk"].proven
    ran(alice, "clerk", "s")
    assert order(alice, "clerk", "reader") == ["clerk", "reader"]
    members = ranked(alice, "clerk", "reader")
    assert (members["clerk"].record, members["clerk"].stats.success_rate) == ("person", 1.0)
    assert (members["reader"].record, members["reader"].stats.success_rate) == ("person", 0.6)


def test_below_the_sample_the_organisations_record_decides(alice: Any, bob: Any) -> None:
    # Alice's own two runs of each would put the clerk first (100% against 0%); they are too few to count.
    ran(alice, "clerk", "ss")
    ran(alice, "reader", "ff")
    ran(bob, "clerk", "fffffffsss")
    ran(bob, "reader", "sssssssssf")
    assert order(alice, "clerk", "reader") == ["reader", "clerk"]
    members = ranked(alice, "clerk", "reader")
    assert {member.record for member in members.values()} == {"organisation"}
    # The organisation's runs of a spec include hers.
    assert (members["reader"].stats.sample_size, members["reader"].stats.success_rate) == (12, 9 / 12)
    assert (members["clerk"].stats.sample_size, members["clerk"].stats.success_rate) == (12, 5 / 12)


def test_the_organisations_record_is_its_last_hundred_runs(alice: Any, bob: Any,
                                                           user_factory: Callable[..., Any]) -> None:
    carol = user_factory("carol")
    ran(bob, "clerk", "f" * 100)
    ran(carol, "clerk", "s" * 100)  # since then, the clerk has done everything asked of it
    ran(bob, "reader", "s" * 19 + "f")
    members = ranked(alice, "reader", "clerk")
    assert (members["clerk"].stats.sample_size, members["clerk"].stats.success_rate) == (100, 1.0)
    assert order(alice, "reader", "clerk") == ["clerk", "reader"]


def test_the_organisations_last_hundred_runs_are_gathered_from_as_many_people(alice: Any) -> None:
    people = get_user_model().objects.bulk_create(
        get_user_model()(username=f"colleague{number}") for number in range(101)
    )
    ran(people[0], "clerk", "f")  # the oldest of 101 runs, one per person: not among the last hundred
    for person in people[1:]:
        ran(person, "clerk", "s")
    clerk = ranked(alice, "clerk")["clerk"]
    assert (clerk.record, clerk.stats.sample_size, clerk.stats.success_rate) == ("organisation", 100, 1.0)


def test_for_nobody_in_particular_the_organisation_decides_its_own_profile_included(alice: Any) -> None:
    profile_record_invocation(owner=None, spec_name="clerk", entry={"status": "success"})
    ran(None, "clerk", "ssss")
    ran(alice, "reader", "sssff")
    assert order(None, "reader", "clerk") == ["clerk", "reader"]
    assert ranked(None, "clerk")["clerk"].record == "organisation"


def test_a_member_nobody_ran_is_unproven_and_follows_in_declaration_order(alice: Any, bob: Any) -> None:
    ran(alice, "reader", "sssss")
    ran(alice, "clerk", "fffff")
    ran(bob, "rookie", "sss")
    # Declared twice, the rookie is one member; the clerk, who always failed, is still offered.
    assert order(alice, "rookie", "clerk", "ghost", "reader", "rookie") == ["reader", "clerk", "rookie", "ghost"]
    members = ranked(alice, "rookie", "clerk", "ghost", "reader")
    assert [name for name, member in members.items() if not member.proven] == ["rookie", "ghost"]
    assert (members["ghost"].score, members["ghost"].annotation) == (None, "no record yet")
    assert members["rookie"].annotation == "no record yet: 3 runs so far, 5 make one"


def test_intent_affinity_adds_weight_but_never_outweighs_a_clearly_better_record(alice: Any) -> None:
    ran(alice, "reader", "s" * 18 + "ff", intent=LIST)  # 90%
    ran(alice, "clerk", "s" * 17 + "fff", intent=CREATE)  # 85%, every run a task made
    ran(alice, "scribe", "s" * 15 + "f" * 5, intent=CREATE)  # 75%, every run a task made
    assert order(alice, "scribe", "clerk", "reader") == ["reader", "clerk", "scribe"]
    assert order(alice, "scribe", "clerk", "reader", intent="tracker_comment_create") == ["reader", "clerk", "scribe"]
    # Asked to make a task, the clerk's 85% + 10 beats the reader's 90% + 0; the scribe's 75% + 10 does not.
    assert order(alice, "scribe", "clerk", "reader", intent=CREATE) == ["clerk", "reader", "scribe"]
    members = ranked(alice, "clerk", "reader", intent=CREATE)
    assert members["clerk"].score == pytest.approx(0.95)
    assert (members["clerk"].intent_runs, members["reader"].intent_runs) == (20, 0)


def test_equal_scores_go_by_trend_then_declaration_order(alice: Any) -> None:
    ran(alice, "worse", "ssssffff")
    ran(alice, "steady", "ssffssff")
    ran(alice, "better", "ffffssss")
    ran(alice, "twin_a", "ssffssff")
    ran(alice, "twin_b", "ssffssff")
    assert order(alice, "worse", "steady", "better") == ["better", "steady", "worse"]
    assert order(alice, "twin_b", "twin_a") == ["twin_b", "twin_a"]
    assert order(alice, "twin_a", "twin_b") == ["twin_a", "twin_b"]
    assert order(alice, "steady", "twin_b", "twin_a") == ["steady", "twin_b", "twin_a"]


def test_another_persons_record_never_decides_for_someone_with_their_own_sample(alice: Any, bob: Any) -> None:
    ran(alice, "reader", "sssss")
    ran(alice, "clerk", "ssfff")
    ran(bob, "reader", "f" * 50)  # pooled with Alice's, the clerk would win for her too
    ran(bob, "clerk", "s" * 50)
    members = ranked(alice, "clerk", "reader")
    assert order(alice, "clerk", "reader") == ["reader", "clerk"]
    assert [(member.record, member.stats.sample_size) for member in members.values()] == [("person", 5)] * 2
    assert order(bob, "clerk", "reader") == ["clerk", "reader"]


def test_each_member_says_in_words_what_its_place_rests_on(alice: Any, bob: Any) -> None:
    ran(alice, "reader", "fss", intent=CREATE)
    ran(alice, "reader", "sssssss")
    ran(bob, "clerk", "ssssffff")
    ran(bob, "rookie", "s")
    members = ranked(alice, "reader", "clerk", "rookie", "ghost", intent=CREATE)
    assert members["reader"].annotation == (
        "for this person: 90% success rate over 10 recent runs, ↑ 20% trend (improving); "
        f"3 of them for {CREATE}"
    )
    assert members["clerk"].annotation == (
        "across the organisation: 50% success rate over 8 recent runs, ↓ 100% trend (getting worse); "
        f"none of them for {CREATE}"
    )
    assert members["rookie"].annotation == "no record yet: 1 run so far, 5 make one"
    assert members["ghost"].annotation == "no record yet"
    # Without an intent nothing is said about one; the figures are the summary line's own.
    reader = ranked(alice, "reader")["reader"].annotation
    assert reader == "for this person: 90% success rate over 10 recent runs, ↑ 20% trend (improving)"
    summary = profile_summary(owner=alice, spec_name="reader")
    assert "90% success rate" in summary and "↑ 20% trend" in summary


def test_the_readmes_worked_example(alice: Any, bob: Any) -> None:
    ran(alice, "reader", "sssssssssf" * 2, intent=LIST)  # 90% in each half: steady
    ran(bob, "clerk", "s" * 44 + "f" * 6, intent=CREATE)  # the organisation's older 50: 88%
    ran(bob, "clerk", "s" * 7, intent=CREATE)
    ran(bob, "clerk", "s" * 31 + "f" * 9, intent=LIST)
    ran(alice, "clerk", "sss", intent=CREATE)  # hers are too few, and are among its newer 50: 82%
    ran(bob, "archivist", "ss")
    assert order(alice, "reader", "clerk", "archivist") == ["reader", "clerk", "archivist"]
    members = members_ranked(owner=alice, spec_names=["reader", "clerk", "archivist"], intent=CREATE)
    assert [(member.spec_name, member.score, member.annotation) for member in members] == [
        ("clerk", pytest.approx(0.91), "across the organisation: 85% success rate over 100 recent runs, "
                                       f"↓ 6% trend (getting worse); 60 of them for {CREATE}"),
        ("reader", pytest.approx(0.90), "for this person: 90% success rate over 20 recent runs, → 0% trend (steady); "
                                        f"none of them for {CREATE}"),
        ("archivist", None, "no record yet: 2 runs so far, 5 make one"),
    ]


def test_a_profile_row_damaged_by_hand_counts_as_no_runs_instead_of_breaking_the_turn(alice: Any, bob: Any) -> None:
    ran(bob, "clerk", "sssss")
    ran(bob, "reader", "sssss")
    ran(alice, "clerk", "ss")
    AgentProfile.objects.filter(owner=bob, spec_name="clerk").update(window={"not": "a list"})
    AgentProfile.objects.filter(owner=alice, spec_name="clerk").update(window=["a note", 7, None])
    members = ranked(alice, "clerk", "reader")
    assert (members["clerk"].proven, members["clerk"].annotation) == (False, "no record yet")
    assert members["reader"].record == "organisation"


def test_ranking_costs_the_same_few_queries_for_two_members_or_twenty(
    alice: Any, bob: Any, django_assert_num_queries: Any
) -> None:
    own = [f"own{number}" for number in range(10)]
    theirs = [f"theirs{number}" for number in range(9)]
    for name in own:
        ran(alice, name, "sssss")
    for name in theirs:
        ran(bob, name, "sssss")
    with django_assert_num_queries(1):
        members_ranked(owner=alice, spec_names=own[:2])
    with django_assert_num_queries(1):
        members_ranked(owner=alice, spec_names=own)
    with django_assert_num_queries(2):
        members_ranked(owner=alice, spec_names=[own[0], theirs[0]])
    with django_assert_num_queries(2):
        members = members_ranked(owner=alice, spec_names=[*own, *theirs, "ghost"])
    assert [member.record for member in members] == ["person"] * 10 + ["organisation"] * 9 + [None]
    with django_assert_num_queries(1):
        members_ranked(owner=None, spec_names=theirs)
