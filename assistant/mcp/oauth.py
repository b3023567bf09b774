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
  refresh its way back in and has to ask the person again.

A host that wants it adds `"django_mcpz.oauth"` to INSTALLED_APPS after `"assistant.mcp"` (whose template
of the consent page wins), `path("oauth/", include("assistant.mcp.oauth_urls"))` and
`path("", include("assistant.mcp.oauth_wellknown"))` to its URLconf.
"""

from __future__ import annotations

import functools
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

from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import TokenRefused, spec_choices, token_check, token_create

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


def oauth_grants_revoke(grant_ids: list[int]) -> None:
    """Revoke every access and refresh token issued from these grants."""
    from django_mcpz.oauth.models import AuthorizationCode

    for grant in AuthorizationCode.objects.filter(pk__in=grant_ids):
        grant.revoke_family()


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


@login_not_required
@csrf_exempt  # the app may POST the authorization request itself; the consent is CSRF-checked inside
@xframe_options_deny
def authorize(request: HttpRequest) -> HttpResponse:
    """django-mcpz's authorization endpoint, whose yes also makes the person's token for the app."""
    from django_mcpz.oauth import views as oauth_views

    if _carries_nul(request):
        return render(request, "django_mcpz/oauth/error.html", status=HTTPStatus.BAD_REQUEST, context={
            "error": "invalid_request", "description": "A parameter of this request holds a NUL character."})
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
