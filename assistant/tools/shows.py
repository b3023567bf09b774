"""`@shows(Model)`: which object a view shows or acts on, for the page context (assistant/page_context/)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import models
from django.views.generic.detail import SingleObjectMixin

SHOWS_ATTRIBUTE = "assistant_shows"


@dataclass(frozen=True)
class Shown:
    """What `@shows` declares: the page shows one `model` row, found by the URL argument `kwarg`
    compared with the model's field `lookup`."""

    model: type[models.Model]
    kwarg: str = "pk"
    lookup: str = "pk"


def shows(model: type[models.Model], *, kwarg: str = "pk", lookup: str = "pk") -> Callable[[Any], Any]:
    """Say which object a view shows or acts on, for views that do not say it themselves (function views,
    views that look their object up their own way): `@shows(Project, kwarg="project_id")`. On its page the
    object is what "this" means; a tool view marked so is suggested on that object's pages. The object
    reaches the assistant only through a declared read of `model` the person may use, as any read does.
    Put it above `@tool` (and above login_required and the like). Returns the view unchanged."""
    if not (inspect.isclass(model) and issubclass(model, models.Model)):
        raise TypeError(f"@shows() takes a model class, not {model!r}.")
    declared = Shown(model=model, kwarg=kwarg, lookup=lookup)

    def decorate(view: Any) -> Any:
        setattr(view, SHOWS_ATTRIBUTE, declared)
        return view

    return decorate


def shown_by(callback: Any) -> Shown | None:
    """What `@shows` declares on a view (a URL pattern's callback, a view class or function), or None."""
    view_class = getattr(callback, "view_class", None)
    if view_class is not None:
        return getattr(view_class, SHOWS_ATTRIBUTE, None)
    current = callback
    while current is not None:  # decorators on top (login_required) may not copy the attribute
        found = getattr(current, SHOWS_ATTRIBUTE, None)
        if found is not None:
            return found
        current = getattr(current, "__wrapped__", None)
    return None


def _single_object(view_class: type, kwargs: dict[str, Any]) -> tuple[type[models.Model], str, Any] | None:
    model = getattr(view_class, "model", None)
    queryset = getattr(view_class, "queryset", None)
    if model is None and queryset is not None:
        model = queryset.model
    if model is None:
        return None
    pk_kwarg = getattr(view_class, "pk_url_kwarg", "pk")
    slug_kwarg = getattr(view_class, "slug_url_kwarg", "slug")
    if pk_kwarg in kwargs:
        return model, "pk", kwargs[pk_kwarg]
    if slug_kwarg in kwargs:
        return model, str(getattr(view_class, "slug_field", "slug")), kwargs[slug_kwarg]
    return None


def shown_object(callback: Any, kwargs: dict[str, Any]) -> tuple[type[models.Model], str, Any] | None:
    """The object a view (a URL pattern's callback) shows or acts on when called with the URL's `kwargs`: its
    model, the field to look it up by and the value; None when nothing says. What `@shows` declares, or a
    single-object view's own (DetailView, UpdateView, DeleteView: their `model` or `queryset` and the `pk`
    or `slug` argument)."""
    declared = shown_by(callback)
    if declared is not None:
        return (declared.model, declared.lookup, kwargs[declared.kwarg]) if declared.kwarg in kwargs else None
    view_class = getattr(callback, "view_class", None)
    if view_class is None or not issubclass(view_class, SingleObjectMixin):
        return None
    return _single_object(view_class, kwargs)
