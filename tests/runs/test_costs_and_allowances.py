"""What the assistant's model calls cost, and what a person may spend.

Costs: through the real socket, worker and database, each model call is priced by the run's price table (the
PRICES setting when the message was sent), its cached prompt tokens at their own price, and the run's cost is the
sum of its calls'. Allowances: a person's own allowance wins over their groups', of which the most generous
applies; a send is refused in words, saying when the allowance resets, when too little is left; twenty sends at
once never hold more than the allowance; a run given only what is left stops before a model call would pass it,
saying so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import close_old_connections, connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assistant.conversation.services import Refused, chat_send
from assistant.infra.worker_queue import WorkerQueue, worker_queue, worker_queue_connect
from assistant.llm.prices import call_cost, parse_price
from assistant.models import AgentAllowance, AgentChat, AgentRun, AgentStep
from assistant.runs.allowances import limits_of, period_bounds
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tracker.models import Project, Task

PRICES = {"openai:fake-gpt": {"input": "2", "cached_input": "0.5", "output": "8"}}


def test_a_call_is_priced_per_million_tokens_its_cached_prompt_at_its_own_price() -> None:
    price = parse_price(PRICES["openai:fake-gpt"])
    # 600 read anew at 2, 400 from the cache at 0.5, 200 written at 8: per million.
    assert call_cost(price, prompt_tokens=1000, completion_tokens=200, cached_tokens=400) == Decimal("0.003000")
    assert call_cost(None, prompt_tokens=1000, completion_tokens=200) is None
    assert parse_price({"input": 1, "output": 3}).cached_input == Decimal(1)
    for wrong, says in (({"input": "1"}, "no output price"), ({"input": "x", "output": 1}, "not a number"),
                        ({"input": -1, "output": 1}, "not a price"), ({"input": 1, "output": 1, "cache": 1},
                                                                       "unknown key")):
        with pytest.raises(ValueError, match=says):
            parse_price(wrong)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_each_model_call_and_the_run_cost_what_the_price_table_says(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    Project.objects.create(owner=alice, name="Home")
    fake_openai.queue(
        openai_stream([], [("c1", "tracker_project_list", {})], usage=(1000, 200), cached=400),
        openai_stream(["You have one project."], usage=(1500, 100)),
    )
    tab = connect(alice)

    async def scenario() -> None:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "which projects do I have?"})
        await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.reply_failed"}, timeout=30)
        await tab.disconnect()

    with assistant_settings_with(MODEL="openai:fake-gpt", PRICES=PRICES):
        asyncio.run(scenario())
    # A price changed after the message was sent changes nothing of its run.
    run = AgentRun.objects.get(owner=alice)
    calls = list(run.steps.filter(kind=AgentStep.Kind.MODEL_CALL).order_by("seq"))
    assert [(step.prompt_tokens, step.cached_tokens, step.cost) for step in calls] == [
        (1000, 400, Decimal("0.003000")), (1500, 0, Decimal("0.003800"))]
    assert run.cost == Decimal("0.006800") and run.total_tokens == 2800
    # The tool call costs nothing that is counted; its step has no price.
    assert run.steps.get(kind=AgentStep.Kind.TOOL_CALL).cost is None


@pytest.mark.django_db
def test_a_persons_own_allowance_wins_and_else_the_most_generous_of_their_groups(
        alice: Any, bob: Any, user_factory: Callable[..., Any]) -> None:
    staff_group, team = Group.objects.create(name="Staff"), Group.objects.create(name="Team")
    for person in (alice, bob):
        person.groups.add(staff_group, team)
    AgentAllowance.objects.create(group=staff_group, tokens_per_day=3_000, cost_per_month=Decimal("5"))
    AgentAllowance.objects.create(group=team, tokens_per_day=8_000, tokens_per_month=100_000,
                                  cost_per_month=Decimal("2"))
    AgentAllowance.objects.create(user=bob, tokens_per_month=1_000)

    alices = {(limit.period, limit.kind): limit.amount for limit in limits_of(alice)}
    # Per limit, the most generous group; a limit one group leaves empty is no limit (tokens a month).
    assert alices == {("day", "tokens"): 8_000, ("month", "cost"): Decimal("5")}
    assert [(limit.period, limit.kind, limit.amount) for limit in limits_of(bob)] == [("month", "tokens", 1_000)]
    assert limits_of(user_factory("carol")) == []


def _send(user: Any, text: str) -> AgentRun | Refused:
    try:
        return chat_send(user=user, content=text, new_chat=True).run
    except Refused as refused:
        return refused


@pytest.fixture
def runs_kept_waiting() -> Iterator[list[int]]:
    """The runs sends hand to a worker, kept here instead: each accepted run stays at work, holding what it was
    given (the worker queue is the assistant's port to its workers; this connects a queue that keeps them)."""
    kept: list[int] = []
    celery = worker_queue()
    worker_queue_connect(WorkerQueue(run_turn=lambda run_id, asked: kept.append(run_id),
                                     run_turn_again=kept.append, memory_index_build=lambda **_: None,
                                     memory_index_drop_empty=lambda **_: None))
    try:
        yield kept
    finally:
        worker_queue_connect(celery)


@pytest.mark.django_db(transaction=True)
def test_twenty_sends_at_once_never_hold_more_than_the_allowance(alice: Any, runs_kept_waiting: list[int]) -> None:
    AgentAllowance.objects.create(user=alice, tokens_per_day=10_000)
    results: list[AgentRun | Refused] = []
    start = threading.Barrier(20)

    def one(n: int) -> None:
        close_old_connections()
        try:
            start.wait()
            results.append(_send(alice, f"message {n}"))
        finally:
            close_old_connections()

    with assistant_settings_with(MAX_TOKENS_PER_RUN=3_000, MAX_OUTPUT_TOKENS=1_024):
        threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    accepted = [result for result in results if isinstance(result, AgentRun)]
    refused = [result for result in results if isinstance(result, Refused)]
    held = [AgentRun.objects.get(pk=run.pk).config for run in accepted]
    # Three runs of 3,000 tokens; what is left (1,000) would not pay for one answer (1,024): never over.
    assert len(results) == 20 and len(accepted) == 3 and len(refused) == 17
    assert sorted(runs_kept_waiting) == sorted(run.pk for run in accepted)
    assert sum(config["max_tokens_per_run"] for config in held) == 9_000
    assert all(config["allowance"]["tokens"] == config["max_tokens_per_run"] for config in held)
    resets = timezone.localtime(period_bounds("day", timezone.now())[1])
    assert {(each.code, each.message.split(" It resets")[0]) for each in refused} == {
        ("allowance_spent", "What is left of your daily allowance of 10,000 tokens for the assistant is too little "
                            "for another answer.")}
    assert all(f"It resets at midnight (in {int((resets - timezone.now()).total_seconds() // 3600)} h)" in each.message
               or "in under an hour" in each.message for each in refused)
    # Once they end, only what they used counts.
    AgentRun.objects.filter(pk__in=[run.pk for run in accepted]).update(
        status=AgentRun.Status.SUCCEEDED, total_tokens=500, finished_at=timezone.now())
    with assistant_settings_with(MAX_TOKENS_PER_RUN=50_000):
        again = _send(alice, "one more")
    assert isinstance(again, AgentRun) and again.config["max_tokens_per_run"] == 8_500


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_send_past_the_allowance_is_refused_in_words_and_a_run_given_too_little_stops_saying_why(
        alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer) -> None:
    AgentAllowance.objects.create(user=alice, tokens_per_day=1_500)

    def send(text: str, until: str) -> list[dict[str, Any]]:
        tab = connect(alice)

        async def scenario() -> list[dict[str, Any]]:
            assert (await tab.connect())[0]
            await tab.send_json_to({"type": "assistant.send", "content": text})
            events = await receive_until(tab, lambda e: e["type"] in {until, "assistant.replied"}, timeout=30)
            await tab.disconnect()
            return events

        with assistant_settings_with(MODEL="openai:fake-gpt", MAX_OUTPUT_TOKENS=1_024):
            return asyncio.run(scenario())

    # 1,500 tokens are left: not enough for the first call's prompt and the longest answer it may write.
    failed = send("hello", "assistant.reply_failed")[-1]
    assert failed["type"] == "assistant.reply_failed"
    run = wait_for_run(failed["run_id"], AgentRun.Status.FAILED)
    assert run.stop_reason == AgentRun.StopReason.ALLOWANCE and run.model_calls == 0
    assert failed["error"].startswith("The assistant stopped: another model call would pass what is left of your "
                                      "daily allowance of 1,500 tokens. It resets at midnight (in ")
    # Its hold ended with it: what it used counts. A person who has used it all is refused before any run starts,
    # in words.
    AgentRun.objects.filter(pk=run.pk).update(total_tokens=1_500)
    error = send("hello again", "assistant.error")[-1]
    assert error["code"] == "allowance_spent"
    assert error["message"].startswith("You have used your daily allowance of 1,500 tokens for the assistant. "
                                       "It resets at midnight")
    assert AgentRun.objects.filter(owner=alice).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_run_at_work_when_staff_lower_the_allowance_stops_at_its_next_model_call_saying_why(
        alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer) -> None:
    allowance = AgentAllowance.objects.create(user=alice, tokens_per_day=100_000)

    def send_and_lower_while_waiting(person: Any, to: int) -> AgentRun:
        fake_openai.queue(openai_stream([], [("w1", "test_wait", {"seconds": 2})], usage=(1_000, 50)),
                          openai_stream(["Waited."], usage=(1_100, 20)))
        AgentAllowance.objects.filter(pk=allowance.pk).update(tokens_per_day=100_000)
        with assistant_settings_with(MODEL="openai:fake-gpt", MAX_OUTPUT_TOKENS=1_024):
            sent = chat_send(user=person, content="wait a little", new_chat=True)
            wait_for(lambda: AgentStep.objects.filter(run=sent.run, tool_name="test_wait").exists(), timeout=30,
                     what="the tool call to start")
            AgentAllowance.objects.filter(pk=allowance.pk).update(tokens_per_day=to)
            return wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=60)

    # Lowered to 2,000 while the tool runs: 1,050 used, and the next call may need 1,050 and a 1,024-token answer.
    run = send_and_lower_while_waiting(alice, 2_000)
    assert (run.status, run.stop_reason, run.model_calls) == ("failed", AgentRun.StopReason.ALLOWANCE, 1)
    assert run.error.startswith("The assistant stopped: another model call would pass what is left of your daily "
                                "allowance of 2,000 tokens. It resets at midnight (in ")
    fake_openai.reset()  # the answer the stopped run did not ask for
    # Bob has no allowance: nothing of alice's stops his run.
    assert send_and_lower_while_waiting(bob, 2_000).status == "succeeded"
    # Lowered to what still leaves room for the next call, or raised, the run goes on.
    assert send_and_lower_while_waiting(alice, 8_000).status == "succeeded"
    assert send_and_lower_while_waiting(alice, 200_000).status == "succeeded"
    assert len(fake_openai.bodies) == 6


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_member_at_work_when_staff_lower_the_allowance_stops_and_so_does_the_run_that_asked_it(
        alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer) -> None:
    allowance = AgentAllowance.objects.create(user=alice, tokens_per_day=100_000)
    home = Project.objects.create(owner=alice, name="Home")
    milk = {"project": home.pk, "title": "Buy milk"}
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "Add 'Buy milk' to Home."})], usage=(1_000, 50)),
        # The member's first answer takes a while: the allowance is lowered meanwhile.
        dataclasses.replace(openai_stream([], [("c1", "tracker_task_create", milk)], usage=(1_000, 50)), delay=2),
    )
    chat = AgentChat.objects.create(owner=alice, spec="test-asker")
    with assistant_settings_with(MODEL="openai:fake-gpt", MAX_OUTPUT_TOKENS=1_024):
        sent = chat_send(user=alice, content="add Buy milk to Home", chat_id=chat.pk)
        wait_for(lambda: len(fake_openai.bodies) == 2, timeout=30, what="the member's first model call")
        AgentAllowance.objects.filter(pk=allowance.pk).update(tokens_per_day=3_000)
        top = wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=60)

    # 2,100 used by the tree: another call (its 1,050 and a 1,024-token answer) would pass 3,000.
    member = AgentRun.objects.get(parent=top)
    words = "The assistant stopped: another model call would pass what is left of your daily allowance of 3,000 tokens."
    assert (member.status, member.stop_reason, member.model_calls) == ("failed", AgentRun.StopReason.ALLOWANCE, 1)
    assert member.error.startswith(words)
    # Its call was made before its next model call was refused; the run that asked it stops at its own next one.
    assert Task.objects.filter(project=home, title="Buy milk").exists()
    assert (top.status, top.stop_reason, top.model_calls) == ("failed", AgentRun.StopReason.ALLOWANCE, 1)
    assert top.error.startswith(words) and len(fake_openai.bodies) == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_reply_says_how_much_is_left_once_less_than_a_quarter_of_an_allowance_is(
        alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer) -> None:
    AgentAllowance.objects.create(user=alice, tokens_per_day=40_000, cost_per_month=Decimal("100"))

    def replied(person: Any, usage: tuple[int, int]) -> dict[str, Any]:
        fake_openai.queue(openai_stream(["Done."], usage=usage))
        tab = connect(person)

        async def scenario() -> dict[str, Any]:
            assert (await tab.connect())[0]
            await tab.send_json_to({"type": "assistant.send", "content": "hello", "new_chat": True})
            events = await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.reply_failed"},
                                         timeout=30)
            await tab.disconnect()
            return events[-1]

        with assistant_settings_with(MODEL="openai:fake-gpt", MAX_OUTPUT_TOKENS=1_024, PRICES=PRICES):
            return asyncio.run(scenario())

    # 21,000 of 40,000 used: more than a quarter is left, and nothing is said.
    first = replied(alice, (20_000, 1_000))
    assert first["type"] == "assistant.replied" and "allowance" not in first
    # 31,000 used: 9,000 are left, under a quarter.
    second = replied(alice, (9_500, 500))
    assert second["type"] == "assistant.replied", second
    assert second["allowance"].startswith("9,000 tokens are left of your daily allowance of 40,000 tokens. It resets "
                                          "at midnight (in ")
    # Someone with no allowance is told nothing.
    assert "allowance" not in replied(bob, (19_000, 1_000))

    def loaded(person: Any, **request: Any) -> dict[str, Any]:
        tab = connect(person)

        async def scenario() -> dict[str, Any]:
            assert (await tab.connect())[0]
            await tab.send_json_to({"type": "assistant.load", **request})
            events = await receive_until(tab, lambda e: e["type"] == "assistant.messages_loaded")
            await tab.disconnect()
            return events[-1]

        return asyncio.run(scenario())

    # A reload says it again, from the rows: the newest page of any chat, not an older page, and nobody else's.
    again = loaded(alice)
    assert again["allowance"].startswith("9,000 tokens are left of your daily allowance of 40,000 tokens.")
    assert "allowance" not in loaded(alice, chat_id=again["chat"]["id"], before=again["messages"][-1]["id"])
    assert loaded(bob)["allowance"] is None


def test_periods_start_at_midnight_and_on_the_first_in_the_sites_time_zone() -> None:
    now = timezone.make_aware(datetime(2026, 12, 31, 15, 30))
    day_start, day_reset = period_bounds("day", now)
    month_start, month_reset = period_bounds("month", now)
    assert (timezone.localtime(day_start).hour, (day_reset - day_start).days) == (0, 1)
    assert timezone.localtime(month_start).day == 1 and timezone.localtime(month_reset).month == 1
    assert timezone.localtime(month_reset).year == 2027


def test_a_price_that_cannot_be_read_is_said_at_start_up() -> None:
    from django.core.checks import run_checks

    def e060() -> list[str]:
        found = run_checks(include_deployment_checks=False)
        return [message.msg for message in found if message.id == "assistant.E060"]

    assert e060() == []
    with assistant_settings_with(PRICES={"openai:gpt-4.1": {"input": "cheap", "output": 8}, "local:x": "free"}):
        assert e060() == ["PRICES['openai:gpt-4.1'] 'cheap' is not a number",
                          "PRICES['local:x'] must be a mapping of input, output and (optionally) cached_input prices"]


@pytest.mark.django_db
def test_staff_set_allowances_in_the_admin_and_see_what_each_person_spent(
        alice: Any, user_factory: Callable[..., Any]) -> None:
    staff = Client()
    staff.force_login(user_factory("boss", is_staff=True, is_superuser=True))
    team = Group.objects.create(name="Team")
    added = "/admin/assistant/agentallowance/add/"
    both = staff.post(added, {"user": alice.pk, "group": team.pk, "tokens_per_day": 1000})
    neither = staff.post(added, {"tokens_per_day": 1000})
    for refused in (both, neither):
        assert refused.status_code == 200
        said = refused.content.decode()
        assert "An allowance is for one person or for one group: choose exactly one of them." in said
    assert not AgentAllowance.objects.exists()
    made = staff.post(added, {"user": alice.pk, "tokens_per_day": 20000, "cost_per_month": "5.00"})
    assert made.status_code == 302 and AgentAllowance.objects.get().tokens_per_day == 20000
    # What alice spent: an ended run's tokens today.
    chat = AgentChat.objects.create(owner=alice, spec="default")
    AgentRun.objects.create(owner=alice, chat=chat, spec="default", status="succeeded", total_tokens=1234,
                            cost=Decimal("0.25"), profile_recorded_at=timezone.now())
    listed = staff.get("/admin/assistant/agentallowance/").content.decode()
    assert "alice (person)" in listed and "1,234 tokens, 0.2500 USD" in listed


@pytest.mark.django_db
def test_the_allowances_list_reads_a_page_of_peoples_spend_in_one_statement(
        user_factory: Callable[..., Any]) -> None:
    staff = Client()
    staff.force_login(user_factory("boss", is_staff=True, is_superuser=True))
    AgentAllowance.objects.create(group=Group.objects.create(name="Team"), tokens_per_day=10_000)

    def person_who_spent(name: str, tokens: int) -> None:
        person = user_factory(name)
        AgentAllowance.objects.create(user=person, tokens_per_day=50_000)
        chat = AgentChat.objects.create(owner=person, spec="default")
        AgentRun.objects.create(owner=person, chat=chat, spec="default", status="succeeded", total_tokens=tokens,
                                profile_recorded_at=timezone.now())

    person_who_spent("first", 1_111)
    with CaptureQueriesContext(connection) as with_one:
        staff.get("/admin/assistant/agentallowance/")
    for number in range(2, 12):
        person_who_spent(f"person{number}", number * 1_000)
    with CaptureQueriesContext(connection) as with_eleven:
        listed = staff.get("/admin/assistant/agentallowance/").content.decode()
    assert len(with_eleven) == len(with_one), [query["sql"] for query in with_eleven.captured_queries]
    # Each person's own spend, today's and this month's; the group's row has none of its own.
    assert listed.count("1,111 tokens") == 2 and listed.count("11,000 tokens") == 2
    assert "Team (group)" in listed
