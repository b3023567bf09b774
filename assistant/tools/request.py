"""How a tool call is sent: as a request through the site's own middleware, made with the person's session.

`ToolHandler` is Django's `BaseHandler` loaded with `settings.MIDDLEWARE` (once per process), whose
innermost call is the tool's resolved view (or, for a declared read, the read). So a host's tenant,
second-factor, IP or maintenance middleware applies to the assistant exactly as to the browser; the
session and authentication middleware load `request.session` and `request.user` from the session the
message was sent from; CsrfViewMiddleware checks the request; and an async view is awaited.

What differs from the browser's own request (docs/tools.md says the same):

- It carries the session cookie and a CSRF token pair, no other cookies; `REMOTE_ADDR` is the socket's
  client address, `Host`, scheme and `Origin` are the page's origin; no User-Agent, Referer or
  Accept-Language.
- Messages the view adds (`django.contrib.messages`) are collected for the model and never stored in
  the person's cookie or session. Anything else the view writes to the session is kept, as in a browser.
- Every response (and cookie) is read here and never reaches a browser.
- A call with no session (code naming the user explicitly: tests, a management command) acts as that
  user with an empty, unsaved session, and its CSRF check is waived: there is no browser session to
  forge a request against, and only server code can make such a call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.contrib.messages.storage.base import BaseStorage
from django.core.handlers.base import BaseHandler
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, QueryDict
from django.middleware.csrf import CSRF_SESSION_KEY, get_token
from django.urls import ResolverMatch
from django.utils.datastructures import MultiValueDict

from assistant.access.authority import SentFrom


class CollectedMessages(BaseStorage):
    """Messages added during a tool call, kept in memory to be handed to the model: the person's own
    stored messages are neither read nor written."""

    def _get(self, *args: Any, **kwargs: Any) -> tuple[list[Any], bool]:
        return [], True

    def _store(self, messages: list[Any], response: Any, *args: Any, **kwargs: Any) -> list[Any]:
        return []


@dataclass
class ToolCallState:
    """What one request learned on its way through the middleware."""

    person: Any
    sent_from: SentFrom | None
    target: ResolverMatch | None = None  # the view (or read) the innermost call runs
    reached: bool = False  # the view ran: no middleware answered in its place
    session_ended: bool = False
    exception: BaseException | None = None  # what the view raised, if it did


class ToolRequest(HttpRequest):
    """An in-process request whose scheme is the page's (https behind a proxy header or not)."""

    def __init__(self, scheme: str) -> None:
        super().__init__()
        self._scheme = scheme

    def _get_scheme(self) -> str:
        return self._scheme


def acts_as_person(request: HttpRequest, state: ToolCallState) -> bool:
    """A call made with a session may act only while that session signs in the same, active person."""
    if state.sent_from is None:
        return True
    user = getattr(request, "user", None)
    return bool(
        user is not None and user.is_authenticated and user.pk == state.person.pk and getattr(user, "is_active", True)
    )


class ToolHandler(BaseHandler):
    """The site's middleware around one tool call; the innermost call is the view the executor resolved."""

    def __init__(self) -> None:
        super().__init__()
        self.load_middleware(is_async=False)

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        state: ToolCallState = request.assistant_call  # type: ignore[attr-defined]
        assert state.target is not None
        request.resolver_match = state.target
        return state.target

    def _get_response(self, request: HttpRequest) -> HttpResponse:
        # Every middleware's process_request has run: request.user is the session's user now.
        state: ToolCallState = request.assistant_call  # type: ignore[attr-defined]
        if not acts_as_person(request, state):
            state.session_ended = True
            return HttpResponseForbidden()
        # Replaces the site's message storage (cookie or session) for the rest of the request, so what the
        # view adds comes back to the model and never lands in the person's storage.
        request._messages = CollectedMessages(request)  # type: ignore[attr-defined]
        if state.sent_from is not None and settings.CSRF_USE_SESSIONS and request.method not in _SAFE_METHODS:
            # The person's own CSRF secret lives in their session (minted into it if they had none, as the
            # site does for a page with a form); the request carries the matching token.
            request.META[settings.CSRF_HEADER_NAME] = get_token(request)
            if request.session.get(CSRF_SESSION_KEY) != request.META["CSRF_COOKIE"]:
                request.session[CSRF_SESSION_KEY] = request.META["CSRF_COOKIE"]
        return super()._get_response(request)  # type: ignore[misc]

    def make_view_atomic(self, view: Callable[..., Any]) -> Callable[..., Any]:
        # Called right before the view, once every process_view has let the request through.
        view = super().make_view_atomic(view)
        if iscoroutinefunction(view):

            async def reached_async(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                state: ToolCallState = request.assistant_call  # type: ignore[attr-defined]
                state.reached = True
                try:
                    return await view(request, *args, **kwargs)
                except Exception as exc:
                    state.exception = exc
                    raise

            return reached_async

        def reached(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            state: ToolCallState = request.assistant_call  # type: ignore[attr-defined]
            state.reached = True
            try:
                return view(request, *args, **kwargs)
            except Exception as exc:
                state.exception = exc
                raise

        return reached


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_handler: ToolHandler | None = None
_handler_lock = threading.Lock()


def tool_handler() -> ToolHandler:
    """The middleware chain, loaded once per process (and again when a test changes MIDDLEWARE)."""
    global _handler
    with _handler_lock:
        if _handler is None:
            _handler = ToolHandler()
        return _handler


def _reset_handler(*, setting: str, **kwargs: Any) -> None:
    global _handler
    if setting in ("MIDDLEWARE", "CSRF_USE_SESSIONS"):
        _handler = None


setting_changed.connect(_reset_handler)


def _default_host() -> str:
    for host in settings.ALLOWED_HOSTS:
        if host and host != "*":
            return host.lstrip(".")
    return "localhost"


def build_request(
    *, person: Any, sent_from: SentFrom | None, method: str, path: str, data: QueryDict, tool_name: str,
    files: dict[str, Any] | None = None,
) -> HttpRequest:
    """The request a browser on the person's page would send for this call (see the module's notes); `files`, by
    field, are in its `FILES` as the page's own upload would put them (a POST only)."""
    origin = urlsplit(sent_from.origin) if sent_from is not None and sent_from.origin else None
    if origin is not None:
        scheme, host = origin.scheme, origin.netloc
    else:
        # Without the page's origin: the site's first host, over https when its session cookie needs it.
        scheme, host = ("https" if settings.SESSION_COOKIE_SECURE else "http"), _default_host()
    request = ToolRequest(scheme)
    request.method = method
    request.path = request.path_info = path
    server_name, _, port = host.rpartition(":") if host.rsplit(":", 1)[-1].isdigit() else (host, "", "")
    request.META = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
        "SERVER_NAME": server_name, "SERVER_PORT": port or ("443" if scheme == "https" else "80"),
        "HTTP_HOST": host, "HTTP_ACCEPT": "text/html,application/json",
        "REMOTE_ADDR": (sent_from.client_address if sent_from is not None else None) or "127.0.0.1",
        "HTTP_ORIGIN": f"{scheme}://{host}",
        # As a server's request has them (PEP 3333 says a server always sets both): middleware that reads the
        # environ as WSGI's (a tracer's, a request logger's) finds them.
        "wsgi.url_scheme": scheme, "SERVER_PROTOCOL": "HTTP/1.1",
    }
    if settings.SECURE_PROXY_SSL_HEADER:
        header, secure_value = settings.SECURE_PROXY_SSL_HEADER
        request.META[header] = secure_value if scheme == "https" else "http"
    if method == "GET":
        request.GET = data  # type: ignore[assignment]
        request.META["QUERY_STRING"] = data.urlencode()
    else:
        request.POST = data  # type: ignore[assignment]
        body = data.urlencode().encode()
        request.META["CONTENT_TYPE"] = "application/x-www-form-urlencoded"
        request.META["CONTENT_LENGTH"] = str(len(body))
        request._body = body
    request.FILES = MultiValueDict({name: [upload] for name, upload in (files or {}).items()})
    if sent_from is not None:
        request.COOKIES[settings.SESSION_COOKIE_NAME] = sent_from.session_key
        if not settings.CSRF_USE_SESSIONS:
            # A real pair, as a browser holding the site's CSRF cookie sends it: the secret in the cookie,
            # the masked token in the header. CsrfViewMiddleware checks both, and the Origin.
            minted = HttpRequest()
            request.META[settings.CSRF_HEADER_NAME] = get_token(minted)
            request.COOKIES[settings.CSRF_COOKIE_NAME] = minted.META["CSRF_COOKIE"]
    else:
        # No session: the user is the one the calling code named. AuthenticationMiddleware's lazy user
        # reads these caches first, so it yields that user instead of the empty session's anonymous one.
        request.user = person
        request._cached_user = person  # type: ignore[attr-defined]
        request._acached_user = person  # type: ignore[attr-defined]
        request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
    request.assistant_tool = tool_name  # type: ignore[attr-defined]
    request.assistant_call = ToolCallState(person=person, sent_from=sent_from)  # type: ignore[attr-defined]
    return request


def send(request: HttpRequest) -> HttpResponse:
    """Through the middleware to `request.assistant_call.target` and back. What the view raises comes back
    as the site's own error response (and is kept on the call's state); raises only when the site
    propagates exceptions (DEBUG_PROPAGATE_EXCEPTIONS)."""
    # Tool views answer with plain responses; a streaming one would be read as an empty page.
    return cast(HttpResponse, tool_handler().get_response(request))
