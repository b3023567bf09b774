"""Which object a page of the site shows, from its path alone.

The panel sends the path it is open on; nothing else it sends is believed. The path is resolved with
the site's own URL resolver, and a page names an object when its view says which: a single-object view
(DetailView, UpdateView, DeleteView: their `model` or `queryset` and the `pk`/`slug` argument of the URL),
or any view marked with `@shows(Model, kwarg=...)`. Knowing the object is not seeing it: reading it is
assistant/page_context/read.py's business, as the person.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from django.db import models
from django.urls import Resolver404, resolve

from assistant.tools.shows import shown_object

#: Longer than any path a browser keeps in its address bar for a page of the site.
MAX_PATH_CHARS = 2000


class BadPage(ValueError):
    """What a client sent as `page` is not a path of this site."""


@dataclass(frozen=True)
class PageSubject:
    """The object a page shows: its model and how to find its row; `url_kwargs` are the page's own."""

    path: str
    model: type[models.Model]
    lookup: str
    value: Any
    url_kwargs: dict[str, Any]
    view: Any

    @property
    def kind(self) -> str:
        return str(self.model._meta.verbose_name)

    @property
    def label_model(self) -> str:
        return self.model._meta.label_lower


def clean_path(page: Any) -> str:
    """The path part of what a client sent as its page, or BadPage saying why it is not one."""
    if not isinstance(page, str):
        raise BadPage('"page" must be the path of the page, as a string.')
    if len(page) > MAX_PATH_CHARS:
        raise BadPage(f'"page" is limited to {MAX_PATH_CHARS} characters.')
    if "\x00" in page:
        raise BadPage('"page" must not contain NUL characters.')
    parts = urlsplit(page)
    if parts.scheme or parts.netloc or not parts.path.startswith("/"):
        raise BadPage('"page" must be a path of this site, starting with "/".')
    return unquote(parts.path)


def page_subject(page: Any) -> PageSubject | None:
    """The object the page at `page` shows, or None when it shows none (or is no page of the site).
    Raises BadPage for what is not a path at all."""
    path = clean_path(page)
    try:
        match = resolve(path)
    except Resolver404:
        return None
    found = shown_object(match.func, match.kwargs)
    if found is None:
        return None
    model, lookup, value = found
    return PageSubject(path, model, lookup, value, dict(match.kwargs), match.func)
