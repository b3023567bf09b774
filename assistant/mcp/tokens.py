"""Access tokens: made, revoked and checked here, and nowhere else.

A token is `ast_<prefix>_<secret>`: the prefix (8 random characters) is stored as it is and shown on pages
to tell tokens apart; the whole token is stored only as its SHA-256. The plain token exists once, in what
`token_create` returns.

`token_authenticate(bearer)` is what an endpoint calls for each request: authority is live, so every call
checks again that the token is neither revoked nor expired, that its person is still active and has not
changed their password since, and that its spec still exists. Each refusal is a `TokenRefused` with a
reason of its own (`REASONS`); an endpoint answers them all alike (401), the reason is for its log.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import salted_hmac

from assistant.conf import assistant_settings
from assistant.infra.text import readable_text
from assistant.mcp.models import NAME_MAX, AccessToken
from assistant.models import AgentRun
from assistant.runs.lifecycle import run_finish
from assistant.society.members import members
from assistant.tools.offer import ToolScope, resolve_scope

TOKEN_PREFIX = "ast_"  # noqa: S105  (the marker every token starts with, not a secret)
_PREFIX_CHARS = 8
_TOKEN = re.compile(r"ast_(?P<prefix>[A-Za-z0-9]{8})_(?P<secret>[A-Za-z0-9_-]{43})")
_ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#: last_used_at is written at most this often per token: a busy agent would otherwise write on every call.
LAST_USED_EVERY = timedelta(minutes=1)
#: The longest expiry a token may be given.
MAX_LIFETIME = timedelta(days=3650)
_FINGERPRINT_SALT = "assistant.mcp.AccessToken.password_fingerprint"
_DURATION = re.compile(r"(?P<amount>[0-9]{1,6})(?P<unit>[hdw])")
_UNITS = {"h": ("hours", "hour"), "d": ("days", "day"), "w": ("weeks", "week")}

#: Why a run a worker works on for a token stopped, once the token no longer acts as its person.
STOPPED_MID_RUN = (
    "The access token this was asked with was revoked or no longer acts as you, so the assistant stopped "
    "before its next step.")
#: Why a bearer was refused, each with the words an endpoint's log (never the caller) may get.
REASONS = {
    "malformed": "not an access token",
    "unknown": "no such token",
    "revoked": "the token was revoked",
    "expired": "the token has expired",
    "inactive": "the token's person is no longer active",
    "password_changed": "the token's person changed their password since the token was made",
    "spec_unknown": "the token's assistant spec no longer exists",
}


class TokenRefused(Exception):  # noqa: N818  (a refusal, not a fault)
    """A bearer that does not (or no longer) act as anyone; `reason` is one of REASONS."""

    def __init__(self, reason: str) -> None:
        super().__init__(REASONS[reason])
        self.reason = reason


class InvalidTokenRequest(ValueError):
    """What a person asked for cannot be made; `field` says which input (name, spec, expires, user)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class TokenNotFound(Exception):
    """No token of that person's by that id or name (another person's is not found either)."""


@dataclass(frozen=True)
class CreatedToken:
    token: AccessToken
    #: The plain token: shown once, stored nowhere.
    secret: str


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def password_fingerprint(user: Any, *, secret: str | None = None) -> str:
    """A keyed digest of the person's password hash, as Django's session auth hash is one."""
    return salted_hmac(_FINGERPRINT_SALT, user.password or "", secret=secret, algorithm="sha256").hexdigest()


def _password_unchanged(user: Any, stored: str) -> bool:
    # SECRET_KEY_FALLBACKS keep a rotated key's tokens working, as they keep its sessions.
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return any(hmac.compare_digest(password_fingerprint(user, secret=key), stored) for key in keys)


def spec_choices() -> list[str]:
    """The specs a person may pick for a token: every member with tools of its own, the SPEC setting's first.
    A spec that only hands work to others (`"tools": []`) is not one: its agent would be offered nothing,
    since the site's tools, not its members, are what an agent calls."""
    found = members()
    default = assistant_settings.SPEC
    names = [default, *(name for name in found if name != default)]
    return [name for name in names if name not in found or found[name].scope.names != frozenset()]


def parse_duration(text: str | None) -> timedelta:
    """`12h`, `30d` or `8w` as a positive duration of at most ten years; anything else InvalidTokenRequest."""
    accepted = "a duration such as 12h (hours), 30d (days) or 8w (weeks)"
    match = _DURATION.fullmatch((text or "").strip())
    if match is None:
        raise InvalidTokenRequest("expires", f"--expires needs {accepted}; got {text!r}.")
    amount = int(match["amount"])
    if amount == 0:
        raise InvalidTokenRequest("expires", f"--expires must be more than zero ({accepted}).")
    delta = timedelta(**{_UNITS[match["unit"]][0]: amount})
    if delta > MAX_LIFETIME:
        raise InvalidTokenRequest("expires", f"--expires is at most {MAX_LIFETIME.days} days; got {text!r}.")
    return delta


def _clean_name(name: str) -> str:
    # As the site's other names people type: what hides or reorders text goes (assistant/infra/text.py).
    name = readable_text(name or "")
    if not name:
        raise InvalidTokenRequest("name", "A token needs a name, such as the agent it is for.")
    if len(name) > NAME_MAX:
        raise InvalidTokenRequest("name", f"A token's name is at most {NAME_MAX} characters.")
    return name


def _clean_spec(spec: str | None) -> str:
    known = spec_choices()
    name = spec or (known[0] if known else assistant_settings.SPEC)
    if name not in known:
        raise InvalidTokenRequest("spec", f"Unknown assistant spec {name!r}; known: {', '.join(known)}.")
    return name


def _new_secret() -> tuple[str, str]:
    prefix = "".join(secrets.choice(_ALPHANUMERIC) for _ in range(_PREFIX_CHARS))
    return prefix, f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"


def token_create(
    *, owner: Any, name: str | None = None, spec: str | None = None, read_only: bool = False,
    expires_in: timedelta | None = None, oauth_grant_id: int | None = None, containment: bool = False,
) -> CreatedToken:
    """A new token for `owner`, acting under `spec` (default: the SPEC setting), read-only or not, expiring
    after `expires_in` (default: never). With `containment`, a write the token asks for after one of its
    calls returned someone else's text waits for the person (see AccessToken.containment). The plain token is
    in the result and nowhere else.

    With `oauth_grant_id`, the token of an app the person connected through OAuth (assistant/mcp/oauth.py):
    its plain token is never shown (the app calls with its OAuth access token), and a name already taken is
    numbered rather than refused."""
    if owner is None or not getattr(owner, "is_authenticated", False) or not owner.pk:
        raise InvalidTokenRequest("user", "A token belongs to a signed-up person.")
    if not getattr(owner, "is_active", True):
        raise InvalidTokenRequest("user", f"{owner} is not active; an inactive person's token would be refused.")
    spec_name = _clean_spec(spec)
    if expires_in is not None and not timedelta(0) < expires_in <= MAX_LIFETIME:
        raise InvalidTokenRequest("expires", f"A token expires after more than nothing and at most "
                                             f"{MAX_LIFETIME.days} days.")
    prefix, secret = _new_secret()
    label = _clean_name(name) if name is not None else f"token {prefix}"
    now = timezone.now()
    taken = AccessToken.objects.filter(owner=owner, revoked_at__isnull=True)
    if oauth_grant_id is not None:
        base, number = label[:NAME_MAX - 4], 1
        while taken.filter(name=label).exists():
            number += 1
            label = f"{base} {number}"
    if taken.filter(name=label).exists():
        raise InvalidTokenRequest("name", f"You already have a token named “{label}”; revoke it first or choose "
                                          "another name.")
    try:
        with transaction.atomic():
            token = AccessToken.objects.create(
                owner=owner, name=label, prefix=prefix, token_hash=token_hash(secret), spec=spec_name,
                read_only=read_only, containment=containment, password_fingerprint=password_fingerprint(owner),
                created_at=now,
                expires_at=now + expires_in if expires_in is not None else None, oauth_grant_id=oauth_grant_id,
            )
    except IntegrityError:
        # Made at the same moment by another request (the same name), or, once in 2**47, the same prefix.
        raise InvalidTokenRequest("name", f"You already have a token named “{label}”; revoke it first or choose "
                                          "another name.") from None
    return CreatedToken(token=token, secret=secret)


def token_find(*, owner: Any, name_or_id: str) -> AccessToken:
    """The owner's token by id, else their unrevoked token of that name; TokenNotFound otherwise."""
    text = (name_or_id or "").strip()
    tokens = AccessToken.objects.for_user(owner)
    if text.isascii() and text.isdigit() and len(text) <= 18:
        found = tokens.filter(pk=int(text)).first()
        if found is not None:
            return found
    found = tokens.filter(name=readable_text(text), revoked_at__isnull=True).first()
    if found is None:
        raise TokenNotFound(f"{owner} has no token with the id or name {text!r}.")
    return found


@transaction.atomic
def token_revoke(*, owner: Any, token_id: int) -> tuple[AccessToken, bool]:
    """Revoke one of the owner's tokens: (the token, whether this call revoked it). Another person's token
    and a missing one are TokenNotFound alike. Revoking stops the token's next call."""
    token = AccessToken.objects.for_user(owner).select_for_update().filter(pk=token_id).first()
    if token is None:
        raise TokenNotFound(f"No token {token_id}.")
    if token.revoked_at is not None:
        return token, False
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    token_calls_end([token.pk])
    _grants_revoke([token])
    return token, True


@transaction.atomic
def tokens_revoke(*, tokens: Any) -> int:
    """Revoke every unrevoked token of a queryset (staff, in the admin); how many it revoked."""
    revoking = list(tokens.filter(revoked_at__isnull=True).select_for_update().values_list("pk", flat=True))
    revoked = AccessToken.objects.filter(pk__in=revoking).update(revoked_at=timezone.now())
    token_calls_end(revoking)
    _grants_revoke(list(AccessToken.objects.filter(pk__in=revoking)))
    return int(revoked)


def _grants_revoke(tokens: list[AccessToken]) -> None:
    """A connected app's token revoked here revokes its OAuth grant too (every access and refresh token
    issued from it): the app cannot refresh its way back in, and must ask the person again."""
    grants = [token.oauth_grant_id for token in tokens if token.oauth_grant_id is not None]
    if grants:
        # Only django-mcpz's OAuth app makes a grant, so a token that has one finds that app installed.
        from django_mcpz.oauth.models import AuthorizationCode

        for grant in AuthorizationCode.objects.filter(pk__in=grants):
            grant.revoke_family()


def token_still_acts(token_id: int) -> tuple[str, str] | None:
    """For a run started with this token that a worker works on (an AG-UI frontend's): None while the token
    acts as its person, else the stop reason and why, so the run stops at its next step (live authority, as
    each MCP call checks it). Registered in the run authority's TOKEN_CHECKS by this app."""
    token = AccessToken.objects.select_related("owner").filter(pk=token_id).first()
    if token is None:
        return AgentRun.StopReason.TOKEN_REVOKED, STOPPED_MID_RUN
    try:
        token_check(token)
    except TokenRefused:
        return AgentRun.StopReason.TOKEN_REVOKED, STOPPED_MID_RUN
    return None


def token_calls_end(token_ids: list[int]) -> None:
    """The calls of revoked tokens that wait for approval end now, not taken: the agent that asked can no
    longer call again, so an approval would run nothing, and the person's panel stops asking."""
    waiting = AgentRun.objects.select_for_update().filter(client_token_id__in=token_ids,
                                                          status=AgentRun.Status.AWAITING_CONFIRMATION)
    for run in waiting.order_by("pk"):
        run_finish(run=run, status=AgentRun.Status.CANCELLED, stop_reason=AgentRun.StopReason.TOKEN_REVOKED,
                   error="The access token was revoked, so its call was not taken.")


def token_authenticate(bearer: str | None) -> tuple[Any, AccessToken]:
    """The person and token a bearer acts as, checked now; TokenRefused(reason) when it acts as nobody.

    The token is found by its hash (an index lookup, so no comparison of secrets that time could leak) and
    the hash compared again in constant time."""
    raw = (bearer or "").strip()
    if not _TOKEN.fullmatch(raw):
        raise TokenRefused("malformed")
    digest = token_hash(raw)
    token = AccessToken.objects.select_related("owner").filter(token_hash=digest).first()
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        raise TokenRefused("unknown")
    return token_check(token)


def token_check(token: AccessToken) -> tuple[Any, AccessToken]:
    """The person a found token acts as, checked now (live authority), marking its use; TokenRefused when
    it acts as nobody. Every way in (a bearer token, an OAuth grant) checks the same."""
    now = timezone.now()
    if token.revoked_at is not None:
        raise TokenRefused("revoked")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused("expired")
    user = token.owner
    if not getattr(user, "is_active", True):
        raise TokenRefused("inactive")
    if not _password_unchanged(user, token.password_fingerprint):
        raise TokenRefused("password_changed")
    if token.spec not in spec_choices():
        raise TokenRefused("spec_unknown")
    if token.last_used_at is None or token.last_used_at <= now - LAST_USED_EVERY:
        # One conditional UPDATE: of many calls in the same minute, at most one writes.
        AccessToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_EVERY)
        ).update(last_used_at=now)
        token.last_used_at = now
    return user, token


def token_scope(token: AccessToken) -> ToolScope:
    """The tools and profile a token acts with: its spec's, narrowed to `restricted` when read-only (a
    read-only token never writes, whatever its spec declares; a spec's profile is never widened)."""
    return resolve_scope(token.spec, "restricted" if token.read_only else None)


def token_owner(username: str) -> Any:
    """The person of that username, for the command; InvalidTokenRequest when there is none."""
    model = get_user_model()
    try:
        return model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise InvalidTokenRequest("user", f"No user {username!r}.") from None


def expires_words(moment: datetime | None) -> str:
    return f"expires {moment:%Y-%m-%d %H:%M %Z}" if moment else "never expires"
