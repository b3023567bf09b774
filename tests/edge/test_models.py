"""Every assistant row belongs to one owner: `for_user` never leaks, and deleting a user deletes their rows."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError

from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentRun, AgentStep
from registry.models import AgentProfile

pytestmark = pytest.mark.django_db


def make_records(owner: Any) -> dict[str, Any]:
    chat = AgentChat.objects.create(owner=owner, title=f"{owner.username}'s chat")
    run = AgentRun.objects.create(owner=owner, chat=chat, status=AgentRun.Status.SUCCEEDED)
    message = AgentMessage.objects.create(chat=chat, owner=owner, role="user", content="hello", run=run)
    step = AgentStep.objects.create(run=run, seq=1, kind=AgentStep.Kind.MODEL_CALL)
    memory = AgentMemory.objects.create(owner=owner, content="likes tea", embedding=[1.0, 0.0, 0.0], embedder="t")
    profile = AgentProfile.objects.create(owner=owner, spec_name="default")
    return {"chat": chat, "run": run, "message": message, "step": step, "memory": memory, "profile": profile}


MODELS = [
    ("chat", AgentChat),
    ("run", AgentRun),
    ("message", AgentMessage),
    ("step", AgentStep),
    ("memory", AgentMemory),
    ("profile", AgentProfile),
]


@pytest.mark.parametrize(("key", "model"), MODELS, ids=[key for key, _ in MODELS])
def test_for_user_returns_only_the_users_own_rows(key: str, model: Any, alice: Any, bob: Any) -> None:
    alices = make_records(alice)
    bobs = make_records(bob)
    assert list(model.objects.for_user(alice)) == [alices[key]]
    assert list(model.objects.for_user(bob)) == [bobs[key]]


@pytest.mark.parametrize(("key", "model"), MODELS, ids=[key for key, _ in MODELS])
def test_anonymous_users_see_nothing(key: str, model: Any, alice: Any) -> None:
    make_records(alice)
    assert not model.objects.for_user(AnonymousUser()).exists()
    assert not model.objects.for_user(None).exists()


def test_organisation_wide_profiles_are_visible_to_everyone_but_never_another_users(alice: Any, bob: Any) -> None:
    org = AgentProfile.objects.create(owner=None, spec_name="default")
    bobs = AgentProfile.objects.create(owner=bob, spec_name="default")
    visible = set(AgentProfile.objects.for_user(alice))
    assert org in visible
    assert bobs not in visible


def test_deleting_a_user_deletes_all_their_rows_and_only_theirs(alice: Any, bob: Any) -> None:
    make_records(alice)
    bobs = make_records(bob)
    alice.delete()
    for key, model in MODELS:
        assert list(model.objects.all()) == [bobs[key]], key


def test_memory_records_its_dimension_from_the_vector(alice: Any) -> None:
    memory = AgentMemory.objects.create(owner=alice, content="x", embedding=[0.1] * 384, embedder="local")
    memory.refresh_from_db()
    assert memory.dims == 384
    assert len(memory.embedding) == 384


def test_one_active_run_per_chat_is_enforced_by_the_database(alice: Any) -> None:
    chat = AgentChat.objects.create(owner=alice)
    AgentRun.objects.create(owner=alice, chat=chat, status=AgentRun.Status.RUNNING)
    AgentRun.objects.create(owner=alice, chat=chat, status=AgentRun.Status.SUCCEEDED)  # finished ones don't count
    with pytest.raises(IntegrityError):
        AgentRun.objects.create(owner=alice, chat=chat, status=AgentRun.Status.QUEUED)


def test_step_sequence_numbers_are_unique_within_a_run(alice: Any) -> None:
    run = make_records(alice)["run"]
    with pytest.raises(IntegrityError):
        AgentStep.objects.create(run=run, seq=1, kind=AgentStep.Kind.TOOL_CALL)


def test_one_profile_per_owner_and_spec_even_organisation_wide() -> None:
    AgentProfile.objects.create(owner=None, spec_name="default")
    with pytest.raises(IntegrityError):
        AgentProfile.objects.create(owner=None, spec_name="default")
