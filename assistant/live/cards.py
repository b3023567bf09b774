"""Cards: the app's own template drawing the object a tool call acted on or showed, under its step.

A view tool may name a template (`@tool(card="tracker/task_card.html")`). When a call of it has taken effect (a
read: when it answered), the object is found where a page's object is (assistant/page_context/): the one the
call's own address names, else the one the view sent the person to. It is read as the person, through the
model's declared reads, and the template is given only what that read gives: `object` (and the model's name,
`task`) is a `CardObject` of the read's fields, never the row itself, so a template that reaches for anything
else (another field, a relation the read does not follow, another person's objects) finds nothing there. An
object the person cannot read gets no card at all.

What the template writes is sanitised like a reply (nh3, an allow-list with no scripts, styles, forms, pictures
or frames; links only to this site or the web), bounded, and kept on the step: what the person saw when it was
done, shown live, after a reload and to staff. A template that fails is the developer's to fix, said in the log;
the step goes on without a card.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import nh3
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import get_template
from django.urls import Resolver404, resolve

from assistant.live.markdown import LINK_REL, URL_SCHEMES, link_kept
from assistant.page_context.read import page_context
from assistant.page_context.resolve import BadPage, page_subject
from assistant.tools.declarations import ViewTool
from assistant.tools.registry import registry

logger = logging.getLogger(__name__)

#: A card longer than this is not shown (a card is a glance at one object, not a page).
MAX_CARD_CHARS = 8_000

CARD_TAGS = frozenset({
    "div", "span", "p", "br", "hr", "h3", "h4", "h5", "h6", "strong", "em", "small", "s", "code", "a",
    "ul", "ol", "li", "dl", "dt", "dd", "table", "thead", "tbody", "tr", "th", "td", "time", "abbr",
})
CARD_ATTRIBUTES = {
    "*": {"class", "title", "aria-label", "aria-hidden", "role"},
    "a": {"href"},
    "time": {"datetime"},
    "th": {"scope", "colspan", "rowspan"},
    "td": {"colspan", "rowspan"},
}


class CardObject(Mapping[str, Any]):
    """What a card template sees of its object: the fields its declared read gives, by name. A field read
    through a relation (`project__name`) is reached as the template would reach it (`task.project.name`), the
    relation itself showing as its value there (the project's id); `get_<field>_display` gives a choice's label,
    as on the model. Anything else is not there (the template shows nothing for it)."""

    def __init__(self, fields: Mapping[str, Any], model: type[models.Model] | None = None, shown: Any = None):
        self._fields = dict(fields)
        self._model = model
        self._shown = shown

    def __getitem__(self, key: str) -> Any:
        related = {name[len(key) + 2:]: value for name, value in self._fields.items() if name.startswith(key + "__")}
        if related:
            return CardObject(related, shown=self._fields.get(key))
        if key in self._fields:
            return self._fields[key]
        label = self._display(key)
        if label is not None:
            return label
        raise KeyError(key)

    def _display(self, key: str) -> str | None:
        """`get_status_display`: the label of a declared choice field's value."""
        if self._model is None or not (key.startswith("get_") and key.endswith("_display")):
            return None
        name = key[4:-8]
        if name not in self._fields:
            return None
        try:
            field = self._model._meta.get_field(name)
        except FieldDoesNotExist:
            return None
        choices = dict(getattr(field, "flatchoices", None) or ())
        value = self._fields[name]
        return str(choices.get(value, value)) if choices else None

    def __iter__(self) -> Iterator[str]:
        return iter({name.split("__", 1)[0]: None for name in self._fields})

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __str__(self) -> str:
        return "" if self._shown is None else str(self._shown)


def _keep_attribute(tag: str, name: str, value: str) -> str | None:
    return link_kept(value) if tag == "a" and name == "href" else value


def sanitise_card(html: str) -> str:
    """A card's HTML with only the allow-listed tags and attributes, links only to this site or the web."""
    return nh3.clean(
        html,
        tags=set(CARD_TAGS),
        clean_content_tags={"script", "style"},
        attributes={tag: set(names) for tag, names in CARD_ATTRIBUTES.items()},
        attribute_filter=_keep_attribute,
        url_schemes=set(URL_SCHEMES),
        url_relative="pass_through",  # then narrowed to site paths by _keep_attribute
        link_rel=LINK_REL,
        strip_comments=True,
    ).strip()


def _object_page(user: Any, addresses: list[str], sent_from: Any) -> tuple[type[models.Model], dict[str, Any]] | None:
    """The model and readable fields of the object at the first of `addresses` that names one, as `user` may
    read it; None when none names one, or the one named is not theirs to read (then no later address is
    tried: a call that deleted its object shows nothing, not the page it went to afterwards)."""
    for address in addresses:
        try:
            resolve(address)
            subject = page_subject(address)
        except (BadPage, Resolver404):
            continue
        if subject is None:
            continue
        seen = page_context(user, address, sent_from=sent_from)
        return (subject.model, dict(seen.fields)) if seen is not None else None
    return None


def step_card(user: Any, tool_name: str, outcome: Any, *, sent_from: Any = None) -> str:
    """The card of a tool call's step: its tool's template drawing the object it acted on or showed, as `user`
    may read it, sanitised; "" when the tool declares none, the call did nothing, or nothing can be shown."""
    definition = registry.get(tool_name)
    if not isinstance(definition, ViewTool) or not definition.card:
        return ""
    answered = outcome.took_effect if definition.kind == "write" else outcome.status == "data"
    if not answered:
        return ""
    redirect = outcome.data.get("redirect") if isinstance(outcome.data, dict) else None
    addresses = [address for address in (outcome.called, redirect) if isinstance(address, str) and address]
    found = _object_page(user, [address.split("?", 1)[0] for address in addresses], sent_from)
    if found is None:
        return ""
    model, fields = found
    shown = CardObject(fields, model)
    try:
        html = get_template(definition.card).render({"object": shown, str(model._meta.model_name): shown})
    except (TemplateDoesNotExist, TemplateSyntaxError):
        logger.exception("Assistant tool %r: its card template %r cannot be loaded", tool_name, definition.card)
        return ""
    except Exception:
        # A template is the site's code: whatever it raises is the developer's to fix, and the step it would
        # have drawn goes on without it.
        logger.exception("Assistant tool %r: its card template %r failed", tool_name, definition.card)
        return ""
    card = sanitise_card(html)
    if len(card) > MAX_CARD_CHARS:
        logger.warning("Assistant tool %r: its card (%d characters) is longer than %d, so it is not shown",
                       tool_name, len(card), MAX_CARD_CHARS)
        return ""
    return card
