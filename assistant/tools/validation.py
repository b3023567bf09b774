"""Checks a model's arguments against the derived schema before anything runs.

Only the subset of JSON Schema that `schema.py` produces is understood. The messages are written for
the model: short, naming the argument and what was expected, so it can repair its call.
"""

from __future__ import annotations

import datetime
import re
import uuid
from typing import Any

from assistant.conf import assistant_settings

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _is_type(value: Any, kind: str) -> bool:
    if kind in {"integer", "number"} and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(kind, ()))


def _check_format(value: str, fmt: str) -> str | None:
    try:
        if fmt == "date":
            datetime.date.fromisoformat(value)
        elif fmt == "date-time":
            datetime.datetime.fromisoformat(value)
        elif fmt == "time":
            datetime.time.fromisoformat(value)
        elif fmt == "uuid":
            uuid.UUID(value)
    except ValueError:
        examples = {"date": "2025-01-31", "date-time": "2025-01-31T14:00:00", "time": "14:00",
                    "uuid": "a UUID"}
        return f"must be a {fmt} such as {examples.get(fmt, fmt)}"
    return None


def _value_errors(value: Any, schema: dict[str, Any]) -> str | None:
    kinds = schema.get("type")
    if kinds is not None:
        allowed = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, kind) for kind in allowed):
            return f"must be {' or '.join(allowed)}, not {type(value).__name__}"
    if value is None:
        return None
    if "enum" in schema and value not in schema["enum"]:
        shown = ", ".join(repr(v) for v in schema["enum"][:20])
        return f"must be one of {shown}"
    if isinstance(value, str):
        limit = schema.get("maxLength", assistant_settings.MAX_ARGUMENT_CHARS)
        if len(value) > limit:
            return f"is too long ({len(value)} characters, at most {limit})"
        if len(value) < schema.get("minLength", 0):
            return f"must have at least {schema['minLength']} character(s)"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"must match {schema['pattern']}"
        if "format" in schema:
            return _check_format(value, schema["format"])
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"must be at most {schema['maximum']}"
    if isinstance(value, list):
        if len(value) > assistant_settings.READ_LIMIT_MAX * 4:
            return f"has too many items ({len(value)})"
        items = schema.get("items")
        if items:
            for index, item in enumerate(value):
                problem = _value_errors(item, items)
                if problem:
                    return f"item {index} {problem}"
        if schema.get("uniqueItems") and len({repr(v) for v in value}) != len(value):
            return "must not repeat items"
    return None


def changed_values(asked: dict[str, Any], approved: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each value the person changed before approving a call (approve with changes): what the model asked for and
    what was approved, by argument name; {} when nothing changed."""
    return {name: {"asked": asked.get(name), "approved": approved.get(name)}
            for name in sorted({*asked, *approved}) if asked.get(name) != approved.get(name)}


NUL_PROBLEM = "must not contain NUL characters"


def holds_nul(value: Any) -> bool:
    """A NUL anywhere in `value`: in a string, or in a key or item of a list or object at any depth. Walks
    without recursion, so no depth can crash it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def nul_errors(arguments: Any) -> dict[str, str]:
    """The arguments holding a NUL character, by name: one rule for every channel's tool calls. PostgreSQL's
    text cannot store a NUL, so a call carrying one can be neither run as sent nor recorded as sent (stored,
    it would become U+FFFD, and what ran would differ from what was asked). An argument whose name holds one
    is named with U+FFFD in its place."""
    if not isinstance(arguments, dict):
        return {}
    return {str(name).replace("\x00", "\ufffd"): NUL_PROBLEM for name, value in arguments.items()
            if holds_nul(name) or holds_nul(value)}


def validate_arguments(arguments: Any, schema: dict[str, Any]) -> dict[str, str]:
    """Problems by argument name (`__all__` for the call as a whole); empty when the call is valid."""
    if not isinstance(arguments, dict):
        return {"__all__": f"arguments must be a JSON object, not {type(arguments).__name__}"}
    errors: dict[str, str] = nul_errors(arguments)
    if errors:
        return errors
    properties: dict[str, Any] = schema.get("properties", {})
    for name in arguments:
        if not isinstance(name, str) or name not in properties:
            known = ", ".join(sorted(properties)) or "none"
            errors[str(name)[:60]] = f"is not an argument of this tool (known: {known})"
    for name in schema.get("required", []):
        if name not in arguments:
            errors[name] = "is required"
    for name, value in arguments.items():
        if name in properties and name not in errors:
            problem = _value_errors(value, properties[name])
            if problem:
                errors[name] = problem
    return errors
