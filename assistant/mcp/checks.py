"""What the MCP sub-app checks at start-up: the tools it cannot offer by name, a host that routes the
assistant's pages but not this app's, and a host's OAuth set-up that would let nobody consent (a consent page
without the person's choices, or django-mcpz's own routes whose grants make no token of the person's)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.urls import NoReverseMatch, resolve, reverse

from assistant.infra.sub_app_urls import sub_app_unrouted
from assistant.mcp.oauth import authorize
from assistant.tools.registry import registry


@register()
def check_mcp(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    from django_mcpz.server import TOOL_NAME_RE

    problems: list[CheckMessage] = [
        Warning(f"Assistant tool {definition.name!r} is not offered over MCP, whose tool names are 1–128 letters, "
                "digits, '_', '-' and '.'.", hint="Rename it in @tool(name=...) or readable(name=...).",
                obj=definition.name, id="assistant.W040")
        for definition in registry.all() if TOOL_NAME_RE.fullmatch(definition.name) is None
    ]
    if apps.is_installed("django_mcpz.oauth"):
        problems.extend(_oauth_problems())
    return problems


@register(Tags.urls)
def check_mcp_urls(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """The host includes this app's URLs beside the assistant's own (assistant/urls.py, `assistant_urls`)."""
    return sub_app_unrouted(
        "assistant:mcp", "assistant.mcp.urls", check_id="assistant.W041",
        message="assistant.mcp is installed, but its URLs are not routed: the MCP endpoint (assistant:mcp) and the "
                "access tokens' pages answer 404, and the panel links no tokens page.")


def _oauth_problems() -> list[CheckMessage]:
    labels = [config.name for config in apps.get_app_configs()]
    problems: list[CheckMessage] = []
    if labels.index("django_mcpz.oauth") < labels.index("assistant.mcp"):
        problems.append(Error(
            "django_mcpz.oauth comes before assistant.mcp in INSTALLED_APPS, so its consent page (without the "
            "person's choice of spec and read-only) is shown, and no consent can be given.",
            hint="Put 'django_mcpz.oauth' after 'assistant.mcp'.", id="assistant.E040"))
    try:
        view = resolve(reverse("django_mcpz_oauth:authorize")).func
    except NoReverseMatch:
        return problems  # not routed yet: django-mcpz's own checks and discovery say so
    if view is not authorize:
        problems.append(Error(
            "The OAuth endpoints are routed to django_mcpz.oauth.urls, whose consent makes no access token of the "
            "person's: every call of a connected app would be refused.",
            hint='Include it in their place: path("oauth/", include("assistant.mcp.oauth_urls")).',
            id="assistant.E041"))
    return problems
