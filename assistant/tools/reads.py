"""Read tools: filters on declared fields, free-text search, ordering and a bounded limit, scoped per user."""

from __future__ import annotations

import datetime
import decimal
import logging
import re
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import models
from django.db.models import F, Q
from django.urls import NoReverseMatch

from assistant.conf import assistant_settings
from assistant.tools.declarations import ReadTool
from assistant.tools.provenance import model_field, others_text
from assistant.tools.schema import choice_words

_TEXT_TYPES = {"CharField", "TextField", "EmailField", "SlugField", "URLField"}
_INTEGER_TYPES = {"AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
                  "SmallIntegerField", "PositiveIntegerField", "PositiveSmallIntegerField",
                  "PositiveBigIntegerField"}
_RANGE_TYPES = _INTEGER_TYPES | {"DecimalField", "FloatField", "DateField", "DateTimeField", "TimeField"}
#: The key a read's answer says under which of its text was written by people other than the person.
OTHERS_TEXT = "others_text"
ROW_KEY = "_assistant_row_pk"
_FORMATS = {"DateField": "date", "DateTimeField": "date-time", "TimeField": "time", "UUIDField": "uuid"}
#: The key under which a row carries its object's page (`get_absolute_url()`), for the model to link to.
URL_KEY = "url"
# A path of this site: not `//host/…` or `/\\host` (browsers read both as another host).
SITE_PATH = re.compile(r"/(?![/\\])[^\x00-\x20]*")

logger = logging.getLogger(__name__)


def object_url(obj: Any) -> str | None:
    """The path of the object's own page on this site (its `get_absolute_url()`), or None when it has none, it
    cannot be made, or it leads off the site. Opening it is still the page's business, as the person."""
    make = getattr(obj, "get_absolute_url", None)
    if not callable(make):
        return None
    try:
        url = make()
    except (NoReverseMatch, AttributeError, ValueError, TypeError) as exc:
        logger.warning("%s %r: get_absolute_url() failed (%s), so it is given without its page",
                       type(obj).__name__, getattr(obj, "pk", None), exc)
        return None
    return url if isinstance(url, str) and SITE_PATH.fullmatch(url) else None


def _pages_of(model: type[models.Model], pks: Iterable[Any]) -> dict[Any, str]:
    """The pages of the rows `pks` of `model`, by pk (one query; none for a model without pages)."""
    wanted = list(pks)
    if not wanted or not callable(getattr(model, "get_absolute_url", None)):
        return {}
    found = model._default_manager.in_bulk(wanted)
    return {pk: url for pk, obj in found.items() if (url := object_url(obj)) is not None}


def _internal_type(field: Any) -> str:
    if field.is_relation:
        return _internal_type(field.target_field) if hasattr(field, "target_field") else "BigAutoField"
    return field.get_internal_type()


def _value_schema(field: Any) -> dict[str, Any]:
    kind = _internal_type(field)
    if getattr(field, "choices", None) and not field.is_relation:
        values = [value for value, _ in field.flatchoices]
        return {"type": "integer" if kind in _INTEGER_TYPES else "string", "enum": values}
    if kind in _INTEGER_TYPES:
        return {"type": "integer"}
    if kind in {"DecimalField", "FloatField"}:
        return {"type": "number"}
    if kind == "BooleanField":
        return {"type": "boolean"}
    prop: dict[str, Any] = {"type": "string"}
    if kind in _FORMATS:
        prop["format"] = _FORMATS[kind]
    if kind in _TEXT_TYPES:
        prop["maxLength"] = 200
    return prop


def _label(name: str) -> str:
    return name.replace("__", " ").replace("_", " ")


def _search_fields(definition: ReadTool) -> list[str]:
    if definition.search_fields:
        return definition.search_fields
    return [name for name in definition.fields
            if _internal_type(model_field(definition.model, name)) in _TEXT_TYPES]


def read_parameters(definition: ReadTool) -> dict[str, Any]:
    """The JSON Schema of a read tool: one property per filter, plus search, ordering and limit."""
    properties: dict[str, Any] = {}
    for name in definition.fields:
        field = model_field(definition.model, name)
        kind = _internal_type(field)
        value = _value_schema(field)
        label = _label(name)
        exact = dict(value)
        if field.null:
            exact["type"] = [exact["type"], "null"]
        # What a stored choice means ("todo = To do"), for the model that reads rows of them as much as filters.
        meaning = choice_words(field.flatchoices) if "enum" in value else ""
        properties[name] = {**exact, "description": " ".join(
            part for part in (f"Only rows whose {label} is exactly this.", meaning and meaning + ".") if part)}
        if kind in _TEXT_TYPES and "enum" not in value:
            properties[f"{name}__contains"] = {"type": "string", "maxLength": 200,
                                              "description": f"Only rows whose {label} contains this text (any case)."}
        if kind in _RANGE_TYPES and not field.is_relation and ("enum" not in value or kind in _INTEGER_TYPES):
            properties[f"{name}__gte"] = {**value, "description": f"Only rows whose {label} is at least this."}
            properties[f"{name}__lte"] = {**value, "description": f"Only rows whose {label} is at most this."}
        if "enum" in value or field.is_relation or kind in _INTEGER_TYPES:
            properties[f"{name}__in"] = {"type": "array", "items": value, "minItems": 1,
                                         "maxItems": assistant_settings.READ_LIMIT_MAX,
                                         "description": f"Only rows whose {label} is one of these."}
    searched = _search_fields(definition)
    if searched:
        properties["search"] = {"type": "string", "maxLength": 200,
                                "description": f"Free text looked up in {', '.join(_label(n) for n in searched)}."}
    orderings = [prefix + name for name in definition.fields for prefix in ("", "-")]
    properties["ordering"] = {"type": "string", "enum": orderings,
                              "description": "Sort by this field; a leading '-' sorts descending."}
    limit = int(assistant_settings.READ_LIMIT_MAX)
    properties["limit"] = {"type": "integer", "minimum": 1, "maximum": limit,
                           "description": f"How many rows at most (default {min(20, limit)}, at most {limit})."}
    return {"type": "object", "properties": properties, "required": [], "additionalProperties": False}


def scoped_queryset(definition: ReadTool, user: Any) -> models.QuerySet:
    """The rows `user` may read; none at all when the model declares no scope (default deny)."""
    queryset = definition.model._default_manager.all()
    if definition.scope is None:
        return queryset.none()
    if isinstance(definition.scope, str):
        return getattr(queryset, definition.scope)(user)
    return definition.scope(user, queryset)


def jsonable(value: Any) -> Any:
    """A field value as JSON can carry it (dates as ISO text, decimals as numbers, UUIDs as text)."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def run_read(definition: ReadTool, user: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Rows of the declared fields matching the (already validated) arguments."""
    queryset = scoped_queryset(definition, user)
    filters: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in {"search", "ordering", "limit"}:
            continue
        if key.endswith("__contains"):
            filters[key.removesuffix("__contains") + "__icontains"] = value
        elif value is None and key in definition.fields:
            filters[key + "__isnull"] = True
        else:
            filters[key] = value
    queryset = queryset.filter(**filters)
    text = (arguments.get("search") or "").strip()
    if text:
        matches = Q()
        for name in _search_fields(definition):
            matches |= Q(**{f"{name}__icontains": text})
        queryset = queryset.filter(matches)
    ordering = arguments.get("ordering") or _default_ordering(definition)
    queryset = queryset.order_by(*([ordering] if isinstance(ordering, str) else ordering), "pk")
    limit = min(int(arguments.get("limit") or min(20, assistant_settings.READ_LIMIT_MAX)),
                int(assistant_settings.READ_LIMIT_MAX))
    # The rows' own keys ride along (as ROW_KEY) for telling whose text each carries, then are dropped.
    rows = list(queryset.values(*definition.fields, **{ROW_KEY: F("pk")})[: limit + 1])
    shown = rows[:limit]
    results = [{name: jsonable(value) for name, value in row.items() if name != ROW_KEY} for row in shown]
    if URL_KEY not in definition.fields:
        # Each row's page, so that an answer naming it can link to it (checked again, as the person, when the
        # answer is written: assistant/live/links.py).
        pages = _pages_of(definition.model, (row[ROW_KEY] for row in shown))
        for row, result in zip(shown, results, strict=True):
            if row[ROW_KEY] in pages:
                result[URL_KEY] = pages[row[ROW_KEY]]
    answer: dict[str, Any] = {"results": results, "returned": len(results), "truncated": len(rows) > limit}
    sources = others_text(user, definition.model, [(row[ROW_KEY], row) for row in shown], definition.fields,
                          where=definition.name)
    if sources:
        answer[OTHERS_TEXT] = sources
    return answer


def _default_ordering(definition: ReadTool) -> list[str]:
    if definition.ordering:
        return definition.ordering
    declared: Any = definition.model._meta.ordering or []
    meta_ordering = [o for o in declared if isinstance(o, str)]
    if meta_ordering and all(o.lstrip("-") in definition.fields for o in meta_ordering):
        return meta_ordering
    return ["pk"]
