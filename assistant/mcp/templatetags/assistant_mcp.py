"""What the OAuth consent page offers the person to choose (assistant/mcp/oauth.py)."""

from __future__ import annotations

from django import template

from assistant.mcp.tokens import spec_choices

register = template.Library()


@register.simple_tag
def token_specs() -> list[str]:
    """The specs an app connected now may act under, the site's default first."""
    return spec_choices()
