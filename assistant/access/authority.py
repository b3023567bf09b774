"""The person's authority is live: the assistant acts with the session a message was sent from, and stops
acting for the person when that session ends.

A run started from the socket carries where its message came from (`SentFrom`: the session key, the
client's address and the page's origin). The run's row never holds the key in clear: a keyed digest to
find the session's runs by, and the key sealed for the worker (`assistant/access/session_keys.py`). Its tool
calls are requests through the site's own middleware with that session (see `assistant/tools/request.py`),
and it is checked again here:

- in the worker, when the run is taken up and every `AUTHORITY_CHECK_SECONDS` at its step boundaries;
- in the consumer, every `SESSION_CHECK_SECONDS`, which closes the session's sockets (close code 4401);
- on Django's `user_logged_out` signal, which ends the session's queued and waiting runs at once.

"Live" means what Django's own `get_user()` means for a browser request: the session still exists and
has not expired, its user is active, and the session's auth hash still matches the user's password.

A run with no session (started by code that names the user explicitly, such as tests or a management
command) acts as that user without these checks: no browser session exists to end.
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host
from django.utils.crypto import constant_time_compare

from assistant.access.session_keys import SessionKeyUnreadable, session_key_digest, session_key_open, session_key_seal
from assistant.infra import event_names
from assistant.models import AgentRun

# What the person reads when a run stops because its session ended.
SESSION_ENDED_MESSAGE = "You were signed out, so the assistant stopped acting for you; nothing more was done."
# How often a working run re-checks its session between steps. Each tool call is checked in its own
# request as well (the site's session and authentication middleware load the session for it).
AUTHORITY_CHECK_SECONDS = 1.0


class SessionEnded(Exception):
    """The session a run acts with has ended (or the access token it was started with no longer acts as
    anyone): the run must stop, and take no further action. `stop_reason` says which, for the run's record."""

    def __init__(self, message: str = SESSION_ENDED_MESSAGE,
                 stop_reason: str = AgentRun.StopReason.SESSION_ENDED) -> None:
        super().__init__(message)
        self.message = message
        self.stop_reason = stop_reason


#: How a run started with an access token (`AgentRun.client_token_id`, an AG-UI frontend's) learns that the
#: token still acts as its person: each `(token_id) -> (stop_reason, message) | None` is None while it does.
#: The app that issues tokens (assistant.mcp) adds its own at start-up; the core knows no token model.
TOKEN_CHECKS: list[Callable[[int], tuple[str, str] | None]] = []

#: How a request that sends an `Authorization` header is signed in with one of its person's access tokens, for an
#: endpoint that takes them beside the session (AG-UI's): `(request) -> (person, token)`, or the response that
#: refuses the request. The app that issues tokens (assistant.mcp) adds its own at start-up; while none has, the
#: site takes no access tokens.
TOKEN_AUTHENTICATORS: list[Callable[[HttpRequest], tuple[Any, Any] | HttpResponse]] = []


@dataclass(frozen=True)
class SentFrom:
    """Where a message was sent from: the browser session it came with, and what a request from that page
    would carry (the client's address, the page's origin `scheme://host[:port]`), for the run's tool calls."""

    # A credential: kept out of the repr, so a log line or an error report that shows a SentFrom (or a
    # tool call's state holding one) never shows the key.
    session_key: str = field(repr=False)
    client_address: str | None
    origin: str

    @classmethod
    def from_scope(cls, scope: dict[str, Any]) -> SentFrom | None:
        """From a socket's ASGI scope; None without a saved session (then nobody is signed in)."""
        session = scope.get("session")
        key = getattr(session, "session_key", None)
        if not key:
            return None
        client = scope.get("client") or ()
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        origin = _allowed_origin(headers.get(b"origin", b"").decode("latin-1"))
        if not origin:
            scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
            origin = _allowed_origin(f"{scheme}://{headers.get(b'host', b'').decode('latin-1')}")
        return cls(session_key=key, client_address=_ip_or_none(client[0] if client else None), origin=origin)

    @classmethod
    def of_run(cls, run: AgentRun) -> SentFrom | None:
        """Where the run's message came from, its session key opened from the row; None for a run started
        without a session. Raises SessionEnded when the run came from a session the server can no longer
        open (it ended, or the secret it was sealed under is gone): such a run acts for nobody."""
        if not run.session_digest and not run.session_sealed:
            return None
        try:
            key = session_key_open(run.session_sealed)
        except SessionKeyUnreadable:
            raise SessionEnded() from None
        return cls(session_key=key, client_address=run.client_address, origin=run.client_origin)

    def stored(self) -> dict[str, Any]:
        """The run's fields for this origin: the session as its digest and sealed key, never in clear."""
        return {"session_digest": session_key_digest(self.session_key),
                "session_sealed": session_key_seal(self.session_key),
                "client_address": self.client_address, "client_origin": self.origin}


def _ip_or_none(value: Any) -> str | None:
    try:
        return str(ipaddress.ip_address(str(value))) if value else None
    except ValueError:
        return None


def _allowed_origin(origin: str) -> str:
    """`origin` if it is an http(s) origin whose host the site serves (ALLOWED_HOSTS), else ""."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
        return ""
    domain, _port = split_domain_port(parts.netloc)
    allowed = settings.ALLOWED_HOSTS or ([".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed):
        return ""
    return f"{parts.scheme}://{parts.netloc}"


def _session_store() -> Any:
    return import_module(settings.SESSION_ENGINE).SessionStore


def session_user(session_key: str) -> Any | None:
    """The active user signed in with that session, or None: the rules of Django's `auth.get_user` (the
    session exists and has not expired, its backend still lists the user, the session's auth hash
    matches the password's, by the current secret or a fallback one) without its side effects. Here
    nothing answers the browser, so a session must not be flushed or given a new key by looking at it:
    the person's cookie would then name a session that no longer exists."""
    session = _session_store()(session_key)
    try:
        user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except KeyError:  # not signed in, expired or deleted: the store loads an empty session
        return None
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = load_backend(backend_path).get_user(user_id)  # None for an inactive user under ModelBackend
    if user is None or not getattr(user, "is_active", True):
        return None
    if hasattr(user, "get_session_auth_hash"):
        session_hash = session.get(HASH_SESSION_KEY)
        hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
        if not session_hash or not any(constant_time_compare(session_hash, known) for known in hashes):
            return None
    return user


def session_acts_as(session_key: str, user_id: Any) -> bool:
    """Is that session still live, and signed in as that user?"""
    user = session_user(session_key)
    return user is not None and user.pk == user_id


def session_group(session_key: str) -> str:
    """The channel-layer group of one session's sockets. A digest, so session keys never travel as names."""
    return "assistant.session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def session_ended_event() -> dict[str, Any]:
    return {"type": event_names.SESSION_ENDED, "message": SESSION_ENDED_MESSAGE}


class RunAuthority:
    """The worker's side: may this run still act for its person? `check()` raises SessionEnded if not.

    The first check runs at once (a queued run whose session ended does nothing at all); later ones at
    most every AUTHORITY_CHECK_SECONDS, so a quick turn costs one check, not one per step.
    """

    def __init__(self, run: AgentRun) -> None:
        self.owner_id = run.owner_id
        self.token_id: int | None = run.client_token_id
        # The person as the session's last check found them, loaded as Django loads a request's user.
        self.person: Any | None = None
        self._next_check = 0.0
        self._unreadable = False
        try:
            self.sent_from: SentFrom | None = SentFrom.of_run(run)
        except SessionEnded:
            # Never "no session" (that would act without these checks): a session nobody can use, which
            # the first check ends the run for.
            self._unreadable = True
            self.sent_from = SentFrom(session_key="", client_address=run.client_address, origin=run.client_origin)

    def check(self, *, now: bool = False) -> None:
        """`now`: whatever the last check found, ask again (a run told to stop asks why)."""
        if self._unreadable:
            raise SessionEnded()
        if self.sent_from is None and self.token_id is None:
            return
        at = time.monotonic()
        if at < self._next_check and not now:
            return
        self._next_check = at + AUTHORITY_CHECK_SECONDS
        if self.sent_from is not None:
            person = session_user(self.sent_from.session_key)
            if person is None or person.pk != self.owner_id:
                raise SessionEnded()
            self.person = person
        token_id = self.token_id
        if token_id is None:
            return
        for token_check in TOKEN_CHECKS:
            ended = token_check(token_id)
            if ended is not None:
                raise SessionEnded(ended[1], stop_reason=ended[0])

