"""The assistant's template tags: `{% load assistant %}` then `{% assistant_dock %}` in a base template; the panel
asks `{% assistant_panel_links as panel_links %}` for the links the sub-apps add to its toolbar, and
`{% assistant_dictation as dictation %}` whether to draw the microphone."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template
from django.middleware.csrf import get_token

from assistant.conf import assistant_settings
from assistant.context_processors import model_label
from assistant.llm.prices import cost_words
from assistant.panel_links import PanelLink, panel_links
from assistant.voice.transcription import dictation_on

register = template.Library()

#: Set by the assistant's own page, which is the conversation already: the dock draws no second copy there.
FULL_PAGE_FLAG = "assistant_full_page"


@register.inclusion_tag("assistant/dock.html", takes_context=True)
def assistant_dock(context: template.Context) -> dict[str, Any]:
    """The dock with its stylesheet and scripts, for a signed-in person; nothing for anyone else (the
    assistant's socket refuses them) and nothing on the assistant's own page. Place it anywhere in
    <body>: the dock is fixed to the window's right edge and moves the page aside while it is open."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    show = bool(getattr(user, "is_authenticated", False)) and not context.get(FULL_PAGE_FLAG)
    # The site's CSRF token, for what the panel posts (the files it uploads).
    token = {"csrf_token": get_token(request)} if show and request is not None else {}
    return {"show_dock": show, **token, **(model_label() if show else {})}


@register.simple_tag
def assistant_panel_links() -> tuple[PanelLink, ...]:
    """The links the installed sub-apps registered for the panel's toolbar (assistant/panel_links.py), in their
    order; the panel shows each whose URL is routed."""
    return panel_links()


@register.simple_tag
def assistant_dictation() -> dict[str, Any] | None:
    """Where a transcription model is configured, the limits of a recording, for the microphone beside Send
    (assistant/static/assistant/dictation.js); None draws no microphone."""
    if not dictation_on():
        return None
    return {"max_seconds": assistant_settings.DICTATION_MAX_SECONDS,
            "max_bytes": assistant_settings.DICTATION_MAX_BYTES}


@register.filter
def cost(value: Any) -> str:
    """A cost as staff read it, in the CURRENCY setting (`0.0068 USD`); "" when no price was known."""
    return cost_words(value, none="") if isinstance(value, Decimal) else ""
