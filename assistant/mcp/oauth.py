"""Connecting a hosted agent through OAuth (claude.ai, ChatGPT…): the person signs in on this site, picks the
spec and whether it is read-only, and consents; the app then calls the MCP endpoint with OAuth tokens.

The authorization server is django-mcpz's (`django_mcpz.oauth`: discovery documents, dynamic client
registration, PKCE, rotating refresh tokens). What this module adds is the person's choices and this
product's rules over it:

- the consent page (`authorize`, in place of django-mcpz's) asks which spec the app acts under and whether
  it is read-only, and the yes makes one of the person's access tokens, linked to the OAuth grant (one
  transaction: no grant without its token);
- each call with an OAuth access token is checked by django-mcpz (valid, for this server), then as the
  linked token (`token_check`: revoked, expired, a deactivated person, a changed password, a spec gone),
  so live authority holds the same for both ways in;
- revoking the linked token (the person's tokens page, the admin) revokes the whole grant: the app cannot
  refresh its way back in and has to ask the person again;
- an app that names itself by a client ID metadata document has it fetched and checked under this product's
  limits (`assistant.mcp.client_documents`) before the consent page is shown; dynamic registration (`register`),
  kept for older apps, is bounded and counted per client address.

A host that wants it adds `"django_mcpz.oauth"` to INSTALLED_APPS after `"assistant.mcp"` (whose template
of the consent page wins), `path("oauth/", include("assistant.mcp.oauth_urls"))` and
`path("", include("assistant.mcp.oauth_wellknown"))` to its URLconf.
"""

from __future__ import annotations

import functools
import json
import logging
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.apps import apps
from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.clickjacking import xframe_options_deny
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from assistant.infra.redis_connection import redis_client
from assistant.mcp.conf import mcp_settings
from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import TokenRefused, spec_choices, token_check, token_create

logger = logging.getLogger(__name__)

#: The consent form's fields for the person's choices (django-mcpz's own are `decision` and the CSRF token).
SPEC_FIELD = "assistant_spec"
READ_ONLY_FIELD = "assistant_read_only"


def oauth_installed() -> bool:
    return apps.is_installed("django_mcpz.oauth")


def oauth_authenticate(request: HttpRequest) -> tuple[Any, AccessToken] | HttpResponse:
    """The person and linked token an OAuth access token acts as, checked now; django-mcpz's 401 (whose
    challenge points the app at the authorization server) when the OAuth token is not good. TokenRefused
    when it is, but its linked token acts as nobody."""
    from django_mcpz.oauth.auth import oauth_auth

    refused = oauth_auth(request)
    if refused is not None:
        return refused
    grant = request.mcp_token  # type: ignore[attr-defined]
    token = AccessToken.objects.select_related("owner").filter(oauth_grant_id=grant.code_id).first()
    if token is None or token.owner_id != grant.user_id:
        raise TokenRefused("unknown")
    return token_check(token)


def _granted_code(response: HttpResponse) -> str | None:
    """The authorization code a consent's redirect hands the app, if it is one."""
    if response.status_code not in (301, 302, 303, 307, 308):
        return None
    codes = parse_qs(urlsplit(response.get("Location", "")).query).get("code")
    return codes[0] if codes else None


def _carries_nul(request: HttpRequest) -> bool:
    """A NUL in any parameter: PostgreSQL's text cannot hold one, and django-mcpz looks parameters up as they
    come (a client_id with a NUL was a 500)."""
    return any("\x00" in key or any("\x00" in value for value in values)
               for data in (request.GET, request.POST) for key, values in data.lists())


def _body_carries_nul(request: HttpRequest) -> bool:
    """A NUL anywhere in a JSON body, raw or escaped (a false alarm on a literal backslash-u0000 in a name
    refuses a name nobody means)."""
    return b"\x00" in request.body or b"\\u0000" in request.body


def refusing_nul(view: Any, *, json_body: bool = False) -> Any:
    """One of django-mcpz's OAuth endpoints (which an app calls, answered in JSON), refusing a NUL in any
    parameter (`json_body`: in its JSON body, which is all it reads) as the endpoint refuses any other
    malformed request: 400 `invalid_request`."""

    @functools.wraps(view)
    def endpoint(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if _body_carries_nul(request) if json_body else _carries_nul(request):
            return JsonResponse({"error": "invalid_request", "error_description": "A parameter holds a NUL."},
                                status=HTTPStatus.BAD_REQUEST)
        return view(request, *args, **kwargs)

    return endpoint


#: What an anonymous registration may hold (RFC 7591): it stores a client anyone can make.
MAX_REGISTRATION_BYTES = 16 * 1024
MAX_REDIRECT_URIS = 10
MAX_CLIENT_NAME_CHARS = 200  # what django-mcpz's Client.name holds, which it used to cut a longer name to
MAX_FIELD_CHARS = 2_000
MAX_LIST_ITEMS = 10
REGISTRATION_WINDOW_SECONDS = 3600


def _registration_error(error: str, description: str, status: int = HTTPStatus.BAD_REQUEST,
                        **headers: str) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status,
                        headers={"Cache-Control": "no-store", **headers})


def registration_problem(body: bytes) -> JsonResponse | None:
    """This product's bounds on a registration, beyond django-mcpz's own checks (which still run): its size,
    how many redirect URIs, the name's length, and every other field's length and items; each refusal in
    RFC 7591's error shape."""
    too_large = _registration_error("invalid_client_metadata",
                                    f"The registration is larger than {MAX_REGISTRATION_BYTES // 1024} KB.")
    try:
        metadata = json.loads(body)
    except (ValueError, RecursionError):
        # Not JSON: django-mcpz answers it (invalid_client_metadata), when it is small enough to bother.
        return too_large if len(body) > MAX_REGISTRATION_BYTES else None
    if not isinstance(metadata, dict):
        return too_large if len(body) > MAX_REGISTRATION_BYTES else None
    uris = metadata.get("redirect_uris")
    if isinstance(uris, list) and len(uris) > MAX_REDIRECT_URIS:
        return _registration_error("invalid_redirect_uri",
                                   f"At most {MAX_REDIRECT_URIS} redirect_uris, not {len(uris)}.")
    name = metadata.get("client_name")
    if isinstance(name, str) and len(name) > MAX_CLIENT_NAME_CHARS:
        return _registration_error("invalid_client_metadata",
                                   f"client_name is at most {MAX_CLIENT_NAME_CHARS} characters, not {len(name)}.")
    for field, value in metadata.items():
        if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
            return _registration_error("invalid_client_metadata",
                                       f"{str(field)[:60]} is at most {MAX_FIELD_CHARS} characters.")
        if isinstance(value, list) and len(value) > MAX_LIST_ITEMS:
            return _registration_error("invalid_client_metadata",
                                       f"{str(field)[:60]} has at most {MAX_LIST_ITEMS} items.")
    return too_large if len(body) > MAX_REGISTRATION_BYTES else None


def registration_counted(address: str) -> int | None:
    """Count one registration from this client address in the current window; the seconds until the window
    ends when that is past MCP_OAUTH_REGISTRATIONS_PER_HOUR (refused), else None. One atomic step in the
    assistant's Redis (the window's key made with its expiry if new, then incremented), so registrations
    sent at once are counted exactly."""
    limit = int(mcp_settings.MCP_OAUTH_REGISTRATIONS_PER_HOUR)
    key = f"assistant:oauth-registrations:{address}"
    with redis_client().pipeline(transaction=True) as pipe:
        pipe.set(key, 0, ex=REGISTRATION_WINDOW_SECONDS, nx=True)
        pipe.incr(key)
        pipe.ttl(key)
        _made, count, ttl = pipe.execute()
    return max(1, int(ttl)) if int(count) > limit else None


@login_not_required
@csrf_exempt  # an app registers itself, signed out
@require_POST
def register(request: HttpRequest) -> HttpResponse:
    """django-mcpz's dynamic client registration (RFC 7591), bounded: a registration past this product's
    bounds is refused (`registration_problem`), and one that would store a client is counted against its
    address's MCP_OAUTH_REGISTRATIONS_PER_HOUR (429 past it). Kept for clients that predate client ID
    metadata documents, which need no registration."""
    from django_mcpz.oauth import views as oauth_views
    from django_mcpz.oauth.conf import oauth_settings

    if not oauth_settings.dynamic_registration:
        return oauth_views.register(request)  # turned off: its 404
    problem = registration_problem(request.body)
    if problem is not None:
        return problem
    try:
        oauth_views.validate_registration(json.loads(request.body))
    except (ValueError, RecursionError, oauth_views.RegistrationError):
        return oauth_views.register(request)  # refused there, in the same shape: nothing is stored to count
    try:
        wait = registration_counted(str(request.META.get("REMOTE_ADDR") or "unknown"))
    except RedisError:
        logger.exception("OAuth registration refused: the assistant's Redis did not answer")
        return _registration_error("temporarily_unavailable", "Registration is unavailable for a moment; try again.",
                                   HTTPStatus.SERVICE_UNAVAILABLE)
    if wait is not None:
        return _registration_error(
            "temporarily_unavailable",
            f"Too many registrations from this address: at most "
            f"{mcp_settings.MCP_OAUTH_REGISTRATIONS_PER_HOUR} an hour. Try again in {wait} seconds, or use "
            "a client ID metadata document, which needs no registration.",
            HTTPStatus.TOO_MANY_REQUESTS, **{"Retry-After": str(wait)})
    return oauth_views.register(request)


@login_not_required
@csrf_exempt  # the app may POST the authorization request itself; the consent is CSRF-checked inside
@xframe_options_deny
def authorize(request: HttpRequest) -> HttpResponse:
    """django-mcpz's authorization endpoint, whose yes also makes the person's token for the app."""
    from django_mcpz.oauth import views as oauth_views

    # It imports django-mcpz's OAuth models, which load only where django_mcpz.oauth is installed; this module is
    # imported by the MCP server wherever assistant.mcp is.
    from assistant.mcp.client_documents import DocumentRefused, is_document_url, metadata_client

    if _carries_nul(request):
        return render(request, "django_mcpz/oauth/error.html", status=HTTPStatus.BAD_REQUEST, context={
            "error": "invalid_request", "description": "A parameter of this request holds a NUL character."})
    client_id = request.GET.get("client_id", "")
    if request.user.is_authenticated and is_document_url(client_id):
        # Fetched for a person signed in here only (django-mcpz sends anyone else to sign in first), and kept
        # as django-mcpz's client, which its consent and token endpoint then find.
        try:
            metadata_client(client_id)
        except DocumentRefused as refused:
            return render(request, "django_mcpz/oauth/error.html", status=HTTPStatus.BAD_REQUEST, context={
                "error": "invalid_client", "description": f"The app's client metadata document ({client_id}) "
                                                          f"was not taken: {refused}"})
    allowing = request.method == "POST" and request.POST.get("decision") == "allow"
    if not allowing or not request.user.is_authenticated:
        return oauth_views.authorize(request)
    spec = request.POST.get(SPEC_FIELD) or ""
    if spec not in spec_choices():
        return render(request, "django_mcpz/oauth/error.html", status=HTTPStatus.BAD_REQUEST, context={
            "error": "invalid_request", "description": f"Choose one of the assistant specs offered, not {spec!r}."})
    with transaction.atomic():
        response = oauth_views.authorize(request)
        code = _granted_code(response)
        if code is not None:
            from django_mcpz.oauth.models import AuthorizationCode
            from django_mcpz.tokens import sha256_hex

            grant = AuthorizationCode.objects.select_related("client").get(digest=sha256_hex(code))
            token_create(owner=request.user, name=str(grant.client.name or "Connected app")[:90],
                         spec=spec, read_only=request.POST.get(READ_ONLY_FIELD) == "on", oauth_grant_id=grant.pk)
    return response
