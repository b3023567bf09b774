"""Retention: `manage.py assistant_prune --older-than AGE [--dry-run]` is how evidence leaves, by age only."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentPlan, AgentRun, AgentStep

pytestmark = pytest.mark.django_db


def _aged(model: Any, pk: int, days: int) -> None:
    model.objects.filter(pk=pk).update(created_at=timezone.now() - timedelta(days=days))


def old_run(owner: Any, *, days: int, chat: AgentChat | None = None, status: str = "succeeded",
            steps: int = 2) -> AgentRun:
    chat = chat or AgentChat.objects.create(owner=owner)
    run = AgentRun.objects.create(owner=owner, chat=chat, status=status, reply="r")
    for role in ("user", "assistant"):
        message = AgentMessage.objects.create(chat=chat, owner=owner, role=role, content=role, run=run)
        _aged(AgentMessage, message.pk, days)
    for seq in range(1, steps + 1):
        AgentStep.objects.create(run=run, seq=seq, kind="model_call")
    _aged(AgentRun, run.pk, days)
    _aged(AgentChat, chat.pk, days)
    return run


def memory(owner: Any, *, days: int) -> AgentMemory:
    made = AgentMemory.objects.create(owner=owner, content=f"{days} days old", embedding=[0.1, 0.2], embedder="t")
    _aged(AgentMemory, made.pk, days)
    return made


def prune(*args: str) -> str:
    out = StringIO()
    call_command("assistant_prune", *args, stdout=out)
    return out.getvalue()


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count()
            for model in (AgentRun, AgentStep, AgentPlan, AgentMessage, AgentChat, AgentMemory)}


@pytest.fixture
def history(alice: Any, bob: Any) -> dict[str, Any]:
    """Two old runs in a chat that has nothing newer, an old run in a chat that goes on, an old run still
    waiting for its person, recent runs, old and new memories."""
    gone_chat = AgentChat.objects.create(owner=alice)
    old_run(alice, days=200, chat=gone_chat)
    planned = old_run(alice, days=120, chat=gone_chat, steps=3)
    for revision in (1, 2):  # an old run's plan goes with it
        AgentPlan.objects.create(run=planned, revision=revision, steps=[])
    going_chat = AgentChat.objects.create(owner=bob)
    old_run(bob, days=100, chat=going_chat)
    recent = old_run(bob, days=1, chat=going_chat)
    _aged(AgentChat, going_chat.pk, 100)
    waiting = old_run(alice, days=150, status="awaiting_confirmation", steps=1)
    fresh_chat = AgentChat.objects.create(owner=alice)  # no message yet: not "left empty", just new
    old_memory, new_memory = memory(alice, days=91), memory(alice, days=89)
    return {"gone_chat": gone_chat, "going_chat": going_chat, "recent": recent, "waiting": waiting,
            "fresh_chat": fresh_chat, "old_memory": old_memory, "new_memory": new_memory}


def test_a_dry_run_says_what_would_go_and_deletes_nothing(history: dict[str, Any]) -> None:
    before = counts()

    out = prune("--older-than", "90d", "--dry-run")

    assert counts() == before
    assert "Would delete" in out
    for line in ("3 runs", "7 steps", "6 messages", "1 chat", "1 memory"):
        assert line in out, (line, out)


def test_pruning_removes_old_evidence_and_never_an_active_run(history: dict[str, Any]) -> None:
    dry = prune("--older-than", "90d", "--dry-run")
    before = counts()

    out = prune("--older-than", "90d")

    after = counts()
    assert {name: before[name] - after[name] for name in before} == {
        "AgentRun": 3, "AgentStep": 7, "AgentPlan": 2, "AgentMessage": 6, "AgentChat": 1, "AgentMemory": 1}
    assert out.split("(")[0] == dry.replace("Would delete", "Deleted").split("(")[0]
    assert not AgentChat.objects.filter(pk=history["gone_chat"].pk).exists()
    assert AgentChat.objects.filter(pk=history["going_chat"].pk).exists()
    assert AgentChat.objects.filter(pk=history["fresh_chat"].pk).exists()
    waiting = AgentRun.objects.get(pk=history["waiting"].pk)
    assert waiting.status == "awaiting_confirmation" and waiting.steps.count() == 1 and waiting.messages.count() == 2
    assert AgentRun.objects.get(pk=history["recent"].pk).messages.count() == 2
    assert list(AgentMemory.objects.values_list("pk", flat=True)) == [history["new_memory"].pk]
    # Nothing older is left to go.
    assert "Deleted 0 runs" in prune("--older-than", "90d")


@pytest.mark.parametrize("age", [None, "", "0d", "0w", "90", "ninety days", "-5d", "90y", "99999999999d"])
def test_a_missing_zero_or_invalid_age_is_refused_and_nothing_is_deleted(history: dict[str, Any], age: str | None
                                                                         ) -> None:
    before = counts()
    with pytest.raises(CommandError, match="--older-than"):
        prune() if age is None else prune("--older-than", age)
    assert counts() == before


def test_ages_in_weeks_and_hours_count_as_such(alice: Any) -> None:
    memory(alice, days=20)
    memory(alice, days=10)
    assert "Would delete 0 runs" in prune("--older-than", "3w", "--dry-run")
    assert "1 memory" in prune("--older-than", "2w", "--dry-run")
    assert "2 memories" in prune("--older-than", "48h", "--dry-run")


def test_a_backlog_goes_in_small_batches_with_the_same_counts(history: dict[str, Any]) -> None:
    from assistant.conversation.retention import evidence_prune

    would = evidence_prune(older_than=timedelta(days=90), dry_run=True)
    went = evidence_prune(older_than=timedelta(days=90), dry_run=False, batch_size=1)

    assert went.counts() == would.counts() == [(3, "run", "runs"), (7, "step", "steps"),
                                              (2, "plan revision", "plan revisions"), (6, "message", "messages"),
                                              (1, "chat", "chats"), (1, "memory", "memories")]
    assert not AgentPlan.objects.exists()
    assert AgentRun.objects.get(pk=history["waiting"].pk).steps.count() == 1


def test_pruning_the_old_part_of_a_chat_keeps_its_newer_messages_and_their_thread(alice: Any) -> None:
    """A chat's messages follow each other (a tree): the old ones going takes none of the newer ones with them,
    and the chat then reads from its oldest message kept."""
    from assistant.live.selectors import chat_messages_page

    chat = AgentChat.objects.create(owner=alice)
    said = None
    for days, words in ((200, "old"), (1, "new")):
        run = AgentRun.objects.create(owner=alice, chat=chat, status="succeeded", reply="r")
        for role in ("user", "assistant"):
            said = AgentMessage.objects.create(chat=chat, owner=alice, role=role, content=f"{words} {role}", run=run,
                                               parent=said)
            _aged(AgentMessage, said.pk, days)
        _aged(AgentRun, run.pk, days)
    _aged(AgentChat, chat.pk, 200)

    prune("--older-than", "90d")

    assert [m.content for m in chat_messages_page(chat=chat).messages] == ["new user", "new assistant"]
    assert AgentMessage.objects.get(content="new user").parent is None
