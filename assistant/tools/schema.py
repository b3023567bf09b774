"""JSON Schema derived from what a view already declares: its form, its URL kwargs, its typed parameters.

Nothing here is hand-written per tool. A form field that has no JSON counterpart (a file upload, say)
is reported in `unsupported` so a system check can name it; it is left out of the schema.
"""

from __future__ import annotations

import datetime
import decimal
import inspect
import types
import typing
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.urls import converters as url_converters
from django.utils.text import capfirst

from assistant.llm.types import ATTACHMENT_FORMAT


@dataclass
class DerivedSchema:
    """A JSON Schema object plus what could not be expressed in it."""

    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)

    def merge(self, other: DerivedSchema) -> None:
        for name, prop in other.properties.items():
            # A URL kwarg and a form field of the same name would be ambiguous; the URL wins.
            self.properties.setdefault(name, prop)
        self.required.extend(name for name in other.required if name not in self.required)
        self.unsupported.extend(other.unsupported)

    def as_json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": self.properties,
            "required": list(self.required),
            "additionalProperties": False,
        }


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """Optional form fields may be cleared: null is sent as an empty value."""
    kind = prop.get("type")
    if isinstance(kind, str):
        prop["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        prop["type"] = [*kind, "null"]
    if "enum" in prop and None not in prop["enum"]:
        prop["enum"] = [*prop["enum"], None]
    return prop


def _flat_choices(choices: Iterable[Any]) -> list[Any]:
    values: list[Any] = []
    for value, label in choices:
        if isinstance(label, list | tuple):
            values.extend(inner for inner, _ in label)
        elif value not in ("", None):
            values.append(value)
    return values


def _choice_values(field_: forms.ChoiceField) -> tuple[str, list[Any]]:
    choices: Any = field_.choices
    values = _flat_choices(choices)
    if values and all(isinstance(v, bool) for v in values):
        return "boolean", values
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "integer", values
    return "string", [str(v) for v in values]


def choice_words(choices: Iterable[Any]) -> str:
    """'One of: 1 = Low, 2 = Normal' for a field's choices (a form's or a model's), when the labels say more than
    the values; "" otherwise."""
    pairs = [(value, str(label)) for value, label in choices
             if value not in ("", None) and not isinstance(label, list | tuple)]
    if all(str(value).lower() == label.lower() for value, label in pairs):
        return ""
    return "One of: " + ", ".join(f"{value} = {label}" for value, label in pairs)


def _choice_labels(field_: forms.ChoiceField) -> str:
    choices: Any = field_.choices
    return choice_words(choices)


def _describe(name: str, field_: forms.Field, extra: str = "") -> str:
    label = str(field_.label) if field_.label else capfirst(name.replace("_", " "))
    parts = [label]
    if field_.help_text:
        parts.append(str(field_.help_text))
    if extra:
        parts.append(extra)
    return ". ".join(part.rstrip(".") for part in parts if part) + "."


def _model_id_type(queryset: Any, to_field_name: str | None) -> str:
    if queryset is None:
        return "integer"
    model_field = queryset.model._meta.get_field(to_field_name) if to_field_name else queryset.model._meta.pk
    internal = model_field.get_internal_type()
    return "integer" if internal in {"AutoField", "BigAutoField", "SmallAutoField", "IntegerField",
                                     "BigIntegerField", "PositiveIntegerField"} else "string"


def _json_number(value: Any) -> int | float:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def form_field_schema(name: str, field_: forms.Field) -> dict[str, Any] | None:
    """The JSON Schema of one form field, or None when the field has no JSON form (e.g. a file)."""
    prop: dict[str, Any]
    note = ""
    if isinstance(field_, forms.FileField):
        # A file the person attached to a message (assistant/attachments/), by its id: the call hands it to the
        # view in request.FILES, as the page's own upload would.
        prop = {"type": "integer", "minimum": 1, "format": ATTACHMENT_FORMAT,
                "description": _describe(name, field_, "Id of a file the person attached to a message (its id in "
                                                       "their message's attachments)")}
        return prop if field_.required else _nullable(prop)
    if isinstance(field_, forms.MultiValueField):
        return None
    if isinstance(field_, forms.ModelMultipleChoiceField):
        model = field_.queryset.model._meta.verbose_name if field_.queryset is not None else "object"
        prop = {"type": "array", "items": {"type": _model_id_type(field_.queryset, field_.to_field_name)},
                "uniqueItems": True}
        note = f"Ids of {model} objects"
    elif isinstance(field_, forms.ModelChoiceField):
        model = field_.queryset.model._meta.verbose_name if field_.queryset is not None else "object"
        prop = {"type": _model_id_type(field_.queryset, field_.to_field_name)}
        note = f"Id of a {model}"
    elif isinstance(field_, forms.MultipleChoiceField):
        kind, values = _choice_values(field_)
        prop = {"type": "array", "items": {"type": kind, "enum": values}, "uniqueItems": True}
        note = _choice_labels(field_)
    elif isinstance(field_, forms.ChoiceField):
        kind, values = _choice_values(field_)
        prop = {"type": kind, "enum": values}
        note = _choice_labels(field_)
    elif isinstance(field_, forms.NullBooleanField):
        prop = {"type": ["boolean", "null"]}
    elif isinstance(field_, forms.BooleanField):
        prop = {"type": "boolean"}
    elif isinstance(field_, forms.DecimalField):
        prop = {"type": "number"}
        if field_.decimal_places is not None:
            note = f"At most {field_.decimal_places} decimal places"
    elif isinstance(field_, forms.FloatField):
        prop = {"type": "number"}
    elif isinstance(field_, forms.IntegerField):
        prop = {"type": "integer"}
    elif isinstance(field_, forms.DateTimeField):
        prop = {"type": "string", "format": "date-time"}
    elif isinstance(field_, forms.DateField):
        prop = {"type": "string", "format": "date"}
    elif isinstance(field_, forms.TimeField):
        prop = {"type": "string", "format": "time"}
    elif isinstance(field_, forms.DurationField):
        prop = {"type": "string", "format": "duration"}
    elif isinstance(field_, forms.UUIDField):
        prop = {"type": "string", "format": "uuid"}
    elif isinstance(field_, forms.JSONField):
        prop = {}
    elif isinstance(field_, forms.CharField):
        prop = {"type": "string"}
        if isinstance(field_, forms.EmailField):
            prop["format"] = "email"
        elif isinstance(field_, forms.URLField):
            prop["format"] = "uri"
        elif isinstance(field_, forms.RegexField):
            prop["pattern"] = field_.regex.pattern
        if field_.max_length is not None:
            prop["maxLength"] = int(field_.max_length)
        if field_.min_length is not None:
            prop["minLength"] = int(field_.min_length)
    else:
        return None
    if isinstance(field_, forms.IntegerField):  # includes Decimal and Float fields
        if field_.min_value is not None:
            prop["minimum"] = _json_number(field_.min_value)
        if field_.max_value is not None:
            prop["maximum"] = _json_number(field_.max_value)
    prop["description"] = _describe(name, field_, note)
    # A field may say how it wants to be described (e.g. it also accepts a name instead of an id).
    prop.update(getattr(field_, "assistant_schema", None) or {})
    if not field_.required and not isinstance(field_, forms.BooleanField | forms.MultipleChoiceField):
        prop = _nullable(prop)
    return prop


def form_schema(form_class: type[forms.BaseForm], *, partial: bool = False) -> DerivedSchema:
    """Properties for every field of a Form/ModelForm; required ones listed unless `partial`."""
    derived = DerivedSchema()
    base_fields: dict[str, forms.Field] = getattr(form_class, "base_fields", {})
    for name, field_ in base_fields.items():
        if field_.disabled:
            continue
        prop = form_field_schema(name, field_)
        if prop is None:
            needed = ", required" if field_.required and not partial else ""
            derived.unsupported.append(f"{name} ({type(field_).__name__}{needed})")
            continue
        initial = field_.initial() if callable(field_.initial) else field_.initial
        if not partial and isinstance(initial, str | int | float | bool):
            # What the browser's form would show already filled in; sent when the model omits it.
            prop["default"] = initial
        derived.properties[name] = prop
        if field_.required and not partial and "default" not in prop:
            derived.required.append(name)
    return derived


_CONVERTER_SCHEMAS: dict[type, dict[str, Any]] = {
    url_converters.IntConverter: {"type": "integer", "minimum": 0},
    url_converters.StringConverter: {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},
    url_converters.SlugConverter: {"type": "string", "minLength": 1, "pattern": "^[-a-zA-Z0-9_]+$"},
    url_converters.UUIDConverter: {"type": "string", "format": "uuid"},
    url_converters.PathConverter: {"type": "string", "minLength": 1},
}


def url_kwargs_schema(
    converters: dict[str, Any], descriptions: dict[str, str], model_name: str | None = None
) -> DerivedSchema:
    """Every URL kwarg is required; its type follows its path converter."""
    derived = DerivedSchema()
    for name, converter in converters.items():
        # Exact class first: SlugConverter is a StringConverter, but a narrower one.
        base = _CONVERTER_SCHEMAS.get(type(converter)) or next(
            (schema for kind, schema in _CONVERTER_SCHEMAS.items() if isinstance(converter, kind)), None
        )
        prop = dict(base) if base else {"type": "string", "pattern": f"^(?:{converter.regex})$"}
        if name in descriptions:
            prop["description"] = descriptions[name]
        elif name in {"pk", "id"} and model_name:
            prop["description"] = f"Id of the {model_name}."
        else:
            prop["description"] = capfirst(name.replace("_", " ")) + " (part of the page address)."
        derived.properties[name] = prop
        derived.required.append(name)
    return derived


_SIMPLE_TYPES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    decimal.Decimal: {"type": "number"},
    bool: {"type": "boolean"},
    datetime.date: {"type": "string", "format": "date"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    uuid.UUID: {"type": "string", "format": "uuid"},
}


def annotation_schema(annotation: Any) -> dict[str, Any] | None:
    """JSON Schema for a parameter annotation: simple types, Optional, Literal, list[...]."""
    if annotation in _SIMPLE_TYPES:
        return dict(_SIMPLE_TYPES[annotation])
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        kind = "integer" if kinds == {int} else "string"
        return {"type": kind, "enum": list(args)}
    if origin in (list, tuple, set, frozenset) and args:
        inner = annotation_schema(args[0])
        return None if inner is None else {"type": "array", "items": inner}
    if origin in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:
            inner = annotation_schema(non_null[0])
            return None if inner is None else _nullable(inner)
    return None


def parameters_schema(
    func: Callable[..., Any], skip: Iterable[str], descriptions: dict[str, str]
) -> tuple[DerivedSchema, dict[str, Any]]:
    """Keyword-only typed parameters of a function view (beyond its URL kwargs) and their annotations."""
    derived = DerivedSchema()
    annotations: dict[str, Any] = {}
    skipped = set(skip)
    hints = typing.get_type_hints(func)
    for param in inspect.signature(func).parameters.values():
        if param.kind is not inspect.Parameter.KEYWORD_ONLY or param.name in skipped:
            continue
        hint = hints.get(param.name, Any)
        prop = annotation_schema(hint)
        if prop is None:
            needed = ", required" if param.default is inspect.Parameter.empty else ""
            derived.unsupported.append(f"{param.name} ({hint!r}{needed})")
            continue
        prop["description"] = descriptions.get(param.name, capfirst(param.name.replace("_", " ")) + ".")
        derived.properties[param.name] = prop
        annotations[param.name] = hint
        if param.default is inspect.Parameter.empty:
            derived.required.append(param.name)
    return derived, annotations
