from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from assistant.mcp.forms import TokenCreateForm
from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import CreatedToken, InvalidTokenRequest, TokenNotFound, token_create, token_revoke
from assistant.views import _render_page

_MARKER = 'data-assistant-page="tokens"'


@never_cache  # the one response that shows a new token must not be kept anywhere
@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def tokens_page(request: HttpRequest) -> HttpResponse:
    """The signed-in person's access tokens, newest first, and a form to make one; POST makes it and shows
    the plain token on this response alone."""
    created: CreatedToken | None = None
    if request.method == "POST":
        form = TokenCreateForm(request.POST)
        if form.is_valid():
            try:
                created = token_create(owner=request.user, name=form.cleaned_data["name"],
                                       spec=form.cleaned_data["spec"], read_only=form.cleaned_data["read_only"],
                                       expires_in=form.expires_in(),
                                       containment=form.cleaned_data["containment"])
            except InvalidTokenRequest as problem:
                form.add_error(problem.field if problem.field in form.fields else None, str(problem))
        if created is not None:
            form = TokenCreateForm()
    else:
        form = TokenCreateForm()
    tokens = list(AccessToken.objects.for_user(request.user))
    now = timezone.now()
    endpoint = request.build_absolute_uri(reverse("assistant:mcp"))
    context = {
        "form": form,
        "created": created,
        "rows": [(token, token.state(now)) for token in tokens],
        "endpoint": endpoint,
        # What the person pastes into their agent's configuration (Claude Desktop, Cursor: mcp.json).
        "client_config": _client_config(endpoint, created.secret) if created is not None else "",
    }
    status = 400 if request.method == "POST" and created is None else 200
    return _render(request, context, status=status)


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of the signed-in person's tokens; anyone else's is not found, and keeps working."""
    try:
        token, revoked = token_revoke(owner=request.user, token_id=token_id)
    except TokenNotFound:
        raise Http404("No such token.") from None
    text = (f"Revoked the token “{token.name}”: it no longer acts as you." if revoked
            else f"The token “{token.name}” was already revoked.")
    messages.success(request, text, fail_silently=True)
    return HttpResponseRedirect(reverse("assistant:tokens"))


def _client_config(endpoint: str, secret: str) -> str:
    server = {"type": "http", "url": endpoint, "headers": {"Authorization": f"Bearer {secret}"}}
    return json.dumps({"mcpServers": {"this-site": server}}, indent=2)


def _render(request: HttpRequest, context: dict[str, Any], *, status: int) -> HttpResponse:
    # Standalone, nothing else shows Django's messages, so the page does; in the host's layout, the layout.
    response = _render_page(
        request, standalone="assistant_mcp/tokens.html", content="assistant_mcp/tokens_content.html",
        marker=_MARKER, context=context,
        standalone_context={"assistant_messages": messages.get_messages(request)},
    )
    response.status_code = status
    return response
