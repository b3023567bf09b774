"""Access tokens (issue 21, "who is calling"): made once and stored as a hash, checked live on every use
(revoked, expired, a deactivated person, a changed password: each refused with its own reason), and the
`assistant_token` command that makes and revokes them for scripts."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import (
    InvalidTokenRequest,
    TokenNotFound,
    TokenRefused,
    parse_duration,
    token_authenticate,
    token_create,
    token_revoke,
    token_scope,
)
from tests.conftest import assistant_settings_with

pytestmark = pytest.mark.django_db


def refusal(bearer: str | None) -> str:
    with pytest.raises(TokenRefused) as refused:
        token_authenticate(bearer)
    return refused.value.reason


def test_a_new_token_is_returned_once_and_stored_only_as_its_hash(alice: Any) -> None:
    created = token_create(owner=alice, name="Claude on my laptop", spec="test-reader")

    token = AccessToken.objects.get()
    assert created.token == token and created.secret.startswith(f"ast_{token.prefix}_")
    assert token.token_hash == hashlib.sha256(created.secret.encode()).hexdigest()
    stored = " ".join(str(value) for value in AccessToken.objects.values().get().values())
    # The random part may itself hold "_" (URL-safe base64): it is what follows the prefix.
    random_part = created.secret.removeprefix(f"ast_{token.prefix}_")
    assert created.secret not in stored and random_part not in stored
    assert (token.owner, token.name, token.spec, token.read_only, token.expires_at) == (
        alice, "Claude on my laptop", "test-reader", False, None)
    # Another token is another secret and another prefix.
    other = token_create(owner=alice, name="Cursor")
    assert other.secret != created.secret and other.token.prefix != token.prefix
    assert other.token.spec == "default"  # the SPEC setting of the suite


def test_authenticate_gives_the_person_and_the_token_and_marks_the_use(alice: Any) -> None:
    created = token_create(owner=alice, name="agent")
    assert created.token.last_used_at is None

    user, token = token_authenticate(created.secret)

    assert (user, token) == (alice, created.token)
    first_use = AccessToken.objects.get().last_used_at
    assert first_use is not None and timezone.now() - first_use < timedelta(seconds=5)
    # Within a minute another call writes nothing (a busy agent would write on every call).
    token_authenticate(created.secret)
    assert AccessToken.objects.get().last_used_at == first_use
    # A minute later it does.
    AccessToken.objects.update(last_used_at=first_use - timedelta(minutes=2))
    token_authenticate(created.secret)
    assert AccessToken.objects.get().last_used_at > first_use - timedelta(minutes=1)


def test_each_refusal_has_its_own_reason(alice: Any, bob: Any, user_factory: Any) -> None:
    assert refusal(None) == refusal("") == refusal("Bearer x") == refusal("ast_short") == "malformed"
    made = token_create(owner=alice, name="agent").secret
    assert refusal(made[:-1] + ("A" if made[-1] != "A" else "B")) == "unknown"

    revoked = token_create(owner=alice, name="revoked")
    token_revoke(owner=alice, token_id=revoked.token.pk)
    assert refusal(revoked.secret) == "revoked"

    expired = token_create(owner=alice, name="expired", expires_in=timedelta(hours=1))
    assert token_authenticate(expired.secret)[0] == alice
    AccessToken.objects.filter(pk=expired.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert refusal(expired.secret) == "expired"

    carol = user_factory("carol")
    carols = token_create(owner=carol, name="agent").secret
    carol.is_active = False
    carol.save()
    assert refusal(carols) == "inactive"

    bobs = token_create(owner=bob, name="agent").secret
    assert token_authenticate(bobs)[0] == bob
    bob.set_password("a new one")
    bob.save()
    assert refusal(bobs) == "password_changed"
    # Alice's token, untouched by any of that, still works.
    assert token_authenticate(made)[0] == alice


def test_a_password_change_stops_the_token_but_a_rotated_secret_key_does_not(alice: Any) -> None:
    secret = token_create(owner=alice, name="agent").secret
    with override_settings(SECRET_KEY="a-new-key-" * 5, SECRET_KEY_FALLBACKS=["x" * 50, _current_key()]):
        assert token_authenticate(secret)[0] == alice
    with override_settings(SECRET_KEY="a-new-key-" * 5, SECRET_KEY_FALLBACKS=[]):
        assert refusal(secret) == "password_changed"


def _current_key() -> str:
    from django.conf import settings

    return str(settings.SECRET_KEY)


def test_a_token_whose_spec_is_gone_is_refused(alice: Any) -> None:
    secret = token_create(owner=alice, name="agent", spec="test-reader").secret
    with assistant_settings_with(SPECS={"default": {"tools": "__all__"}}):
        assert refusal(secret) == "spec_unknown"


def test_creation_refuses_what_cannot_be_made(alice: Any) -> None:
    with pytest.raises(InvalidTokenRequest, match="Unknown assistant spec 'nope'") as unknown:
        token_create(owner=alice, name="agent", spec="nope")
    assert unknown.value.field == "spec"
    token_create(owner=alice, name="agent")
    with pytest.raises(InvalidTokenRequest, match="already have a token named “agent”"):
        token_create(owner=alice, name="  agent ")
    for bad in ["", "   ", "x" * 101, "\u200b\u200e", "\x00"]:
        with pytest.raises(InvalidTokenRequest) as problem:
            token_create(owner=alice, name=bad)
        assert problem.value.field == "name"
    with pytest.raises(InvalidTokenRequest):
        token_create(owner=alice, name="forever", expires_in=timedelta(days=4000))
    alice.is_active = False
    with pytest.raises(InvalidTokenRequest):
        token_create(owner=alice, name="inactive")
    assert AccessToken.objects.count() == 1


def test_names_are_kept_as_people_read_them(alice: Any) -> None:
    # As the site's other names: controls and bidi overrides go, spaces collapse.
    made = token_create(owner=alice, name=" my\x07  \u202eagent\n").token
    assert made.name == "my agent"
    with pytest.raises(InvalidTokenRequest, match="already have a token named “my agent”"):
        token_create(owner=alice, name="my agent")


def test_a_revoked_tokens_name_may_be_used_again(alice: Any) -> None:
    first = token_create(owner=alice, name="agent")
    token_revoke(owner=alice, token_id=first.token.pk)
    second = token_create(owner=alice, name="agent")
    assert refusal(first.secret) == "revoked" and token_authenticate(second.secret)[1] == second.token


def test_nobody_revokes_another_persons_token(alice: Any, bob: Any) -> None:
    created = token_create(owner=alice, name="agent")
    with pytest.raises(TokenNotFound):
        token_revoke(owner=bob, token_id=created.token.pk)
    assert token_authenticate(created.secret)[0] == alice
    assert token_revoke(owner=alice, token_id=created.token.pk)[1] is True
    assert token_revoke(owner=alice, token_id=created.token.pk)[1] is False
    assert list(AccessToken.objects.for_user(bob)) == []
    assert list(AccessToken.objects.for_user(None)) == []


def test_a_read_only_token_acts_with_the_restricted_profile_whatever_its_spec(alice: Any) -> None:
    with assistant_settings_with(SPECS={"writer": {"tools": "__all__", "permission_profile": "trusted"}},
                                 SPEC="writer"):
        writer = token_create(owner=alice, name="writer", spec="writer").token
        reader = token_create(owner=alice, name="reader", spec="writer", read_only=True).token
        assert token_scope(writer).profile.name == "trusted"
        assert token_scope(reader).profile.name == "restricted"
        assert not token_scope(reader).profile.allows_writes


@pytest.mark.parametrize(("text", "delta"), [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)),
                                              ("2w", timedelta(weeks=2)), (" 1d ", timedelta(days=1))])
def test_durations(text: str, delta: timedelta) -> None:
    assert parse_duration(text) == delta


@pytest.mark.parametrize("text", ["30x", "0d", "-1d", "d", "", "1.5d", "99999w", "3０d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InvalidTokenRequest):
        parse_duration(text)


# --- the command ---------------------------------------------------------------------------------------


def command(*args: str) -> list[str]:
    out = StringIO()
    call_command("assistant_token", *args, stdout=out)
    return out.getvalue().splitlines()


def test_the_command_prints_the_new_token_alone_on_its_last_line(alice: Any) -> None:
    lines = command("create", "--user", "alice", "--spec", "test-reader", "--read-only", "--name", "ci",
                    "--expires", "30d")

    token = AccessToken.objects.get()
    assert lines[-1].startswith(f"ast_{token.prefix}_") and " " not in lines[-1]
    assert token_authenticate(lines[-1]) == (alice, token)
    assert (token.name, token.spec, token.read_only) == ("ci", "test-reader", True)
    assert timedelta(days=29, hours=23) < token.expires_at - timezone.now() <= timedelta(days=30)
    assert "ci" in lines[0] and "test-reader" in lines[0] and "read-only" in lines[0]
    # Without a name it is named after its prefix; without --expires it never expires.
    lines = command("create", "--user", "alice")
    unnamed = AccessToken.objects.get(token_hash=hashlib.sha256(lines[-1].encode()).hexdigest())
    assert unnamed.name == f"token {unnamed.prefix}" and unnamed.expires_at is None


def test_the_command_revokes_by_name_or_id(alice: Any, bob: Any) -> None:
    by_name = token_create(owner=alice, name="ci")
    by_id = token_create(owner=alice, name="laptop")
    bobs = token_create(owner=bob, name="ci")

    assert "Revoked the token “ci”" in command("revoke", "ci", "--user", "alice")[-1]
    assert "Revoked the token “laptop”" in command("revoke", str(by_id.token.pk), "--user", "alice")[-1]
    assert "already revoked" in command("revoke", str(by_id.token.pk), "--user", "alice")[-1]
    assert refusal(by_name.secret) == refusal(by_id.secret) == "revoked"
    # Bob's token of the same name is his own, and alice's command cannot name it by id either.
    with pytest.raises(CommandError, match="no token"):
        command("revoke", str(bobs.token.pk), "--user", "alice")
    assert token_authenticate(bobs.secret)[0] == bob


@pytest.mark.parametrize(("args", "message"), [
    (["create", "--user", "nobody"], "No user 'nobody'"),
    (["create", "--user", "alice", "--spec", "nope"], "Unknown assistant spec 'nope'"),
    (["create", "--user", "alice", "--expires", "30x"], "--expires needs a duration"),
    (["create", "--user", "alice", "--expires", "0d"], "more than zero"),
    (["create", "--user", "alice", "--name", " "], "needs a name"),
    (["revoke", "nothing", "--user", "alice"], "no token with the id or name 'nothing'"),
    (["revoke", "1", "--user", "nobody"], "No user 'nobody'"),
])
def test_the_command_says_what_is_wrong(alice: Any, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        command(*args)
    assert not AccessToken.objects.exists()


def test_the_command_refuses_a_duplicate_name(alice: Any) -> None:
    command("create", "--user", "alice", "--name", "ci")
    with pytest.raises(CommandError, match="already have a token named “ci”"):
        command("create", "--user", "alice", "--name", "ci")
    assert AccessToken.objects.count() == 1


def test_a_spec_that_only_hands_work_to_others_is_not_offered_for_a_token(alice: Any) -> None:
    # The demo site's default spec is its orchestrator, which has no tools of its own: an agent calling under
    # it would be offered nothing, so the choices leave it out and a token made without a spec takes the
    # first that has tools.
    from assistant.mcp.tokens import spec_choices

    with assistant_settings_with(SPEC="orchestrator"):
        choices = spec_choices()
        made = token_create(owner=alice, name="Claude")
        with pytest.raises(InvalidTokenRequest) as refused:
            token_create(owner=alice, name="Empty", spec="orchestrator")

    assert "orchestrator" not in choices and choices[0] == "default" and "reader" in choices
    assert made.token.spec == "default"
    assert refused.value.field == "spec"
