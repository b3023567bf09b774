from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template import TemplateDoesNotExist, engines
from django.template.backends.django import DjangoTemplates
from django.template.loader import get_template

from assistant.conf import assistant_settings
from assistant.context_processors import model_label
from assistant.templatetags.assistant import FULL_PAGE_FLAG

_BLOCK_NAME = re.compile(r"\w+")
_MARKER = "data-assistant-conversation"


@login_required
def assistant_page(request: HttpRequest) -> HttpResponse:
    """The assistant as a full page: a page of its own, or the content of the host's layout when
    `ASSISTANT["PAGE_LAYOUT"]` names that layout's template and block."""
    context = {FULL_PAGE_FLAG: True, **model_label()}
    layout = assistant_settings.PAGE_LAYOUT
    if layout is None:
        return render(request, "assistant/page.html", context)
    template_name, block = _page_layout(layout)
    # A block's name cannot be a variable, so the page is a two-line template made here; the name was
    # checked to be a plain identifier, and the layout's name travels as a variable.
    source = (
        "{% extends assistant_layout %}"
        f'{{% block {block} %}}{{% include "assistant/page_content.html" %}}{{% endblock %}}'
    )
    html = _django_engine().from_string(source).render({**context, "assistant_layout": template_name}, request)
    if _MARKER not in html:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"] names the block {block!r}, which {template_name!r} does not render; '
            "name a block the layout shows, such as the one its pages fill with their content."
        )
    return HttpResponse(html)


def _page_layout(layout: Any) -> tuple[str, str]:
    """The layout's template name and block, or a configuration error that says what to write."""
    example = '{"template": "base.html", "block": "content"}'
    if not isinstance(layout, dict) or set(layout) != {"template", "block"}:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"] must be None or a dict with a template and a block, e.g. {example}; '
            f"got {layout!r}."
        )
    template_name, block = layout["template"], layout["block"]
    if not isinstance(block, str) or not _BLOCK_NAME.fullmatch(block):
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"]["block"] must be a block name (letters, digits, _); got {block!r}.'
        )
    if not isinstance(template_name, str) or not template_name:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"]["template"] must be a template name; got {template_name!r}.'
        )
    try:
        get_template(template_name)
    except TemplateDoesNotExist as missing:
        raise ImproperlyConfigured(
            f'ASSISTANT["PAGE_LAYOUT"] names the template {template_name!r}, which no template loader finds.'
        ) from missing
    return template_name, block


def _django_engine() -> Any:
    for engine in engines.all():
        if isinstance(engine, DjangoTemplates):
            return engine
    raise ImproperlyConfigured('ASSISTANT["PAGE_LAYOUT"] needs the Django template engine in TEMPLATES.')
