"""Reading tool results (whatever JSON the executor sent back) and writing a reply about them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

LABEL_KEYS = ("title", "name", "label", "subject", "username", "email")
MAX_ROWS_SHOWN = 10

# Outcome words an executor may use, by what they mean for the person reading the reply.
_DENIED = ("denied", "forbidden", "permission", "not_allowed", "unauthori")
_DECLINED = ("declined", "rejected", "cancelled", "canceled")
_NOT_FOUND = ("not_found", "not found", "notfound", "missing", "404")
_INVALID = ("invalid", "validation", "errors")
_PENDING = ("awaiting", "confirm", "pending")
_FAILED = ("error", "failed", "failure")


@dataclass
class Outcome:
    """What one tool result says, in the few categories a reply distinguishes."""

    kind: str  # done | rows | denied | declined | not_found | invalid | pending | failed
    message: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_result(content: str) -> Any:
    try:
        return json.loads(content)
    except (TypeError, json.JSONDecodeError):
        return content


def find_rows(value: Any) -> list[dict[str, Any]]:
    """Every record (a dict with an `id` or `pk`) anywhere in a result, in order."""
    rows: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "id" in node or "pk" in node:
                rows.append(node)
            for child in node.values():
                if isinstance(child, dict | list):
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(value)
    return rows


def row_id(row: dict[str, Any]) -> Any:
    return row.get("id", row.get("pk"))


def match_rows(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Rows with a text field equal to `name` (ignoring case); failing that, containing it."""

    def texts(row: dict[str, Any]) -> Iterator[str]:
        return (v.casefold() for v in row.values() if isinstance(v, str))

    wanted = name.casefold()
    exact = [row for row in rows if wanted in set(texts(row))]
    if exact:
        return exact
    return [row for row in rows if any(wanted in text for text in texts(row))]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key in ("message", "text", "detail"):
            if isinstance(value.get(key), str):
                yield value[key]


def _field_errors(errors: Any) -> list[str]:
    if isinstance(errors, dict):
        return [
            f"{field_name if field_name != '__all__' else 'form'}: {'; '.join(_strings(messages))}"
            for field_name, messages in errors.items()
        ]
    return list(_strings(errors))


def read_outcome(content: str) -> Outcome:
    """Classify one tool result by the words and shapes it contains."""
    value = parse_result(content)
    if not isinstance(value, dict):
        text = str(value)
        lowered = text.lower()
        for kind, needles in (("denied", _DENIED), ("not_found", _NOT_FOUND), ("failed", _FAILED)):
            if any(n in lowered for n in needles):
                return Outcome(kind, text)
        return Outcome(
            "rows" if find_rows(value) else "done", text if isinstance(value, str) else "", rows=find_rows(value)
        )
    message = " ".join(
        s for key in ("message", "messages", "detail", "reason", "error") for s in _strings(value.get(key))
    ).strip()
    status = " ".join(
        str(value.get(key, ""))
        for key in ("status", "outcome", "result", "kind", "code")
        if isinstance(value.get(key, ""), str | int)
    ).lower()
    errors = _field_errors(value.get("errors") or value.get("field_errors") or {})
    if any(n in status for n in _DECLINED):
        return Outcome("declined", message)
    if any(n in status for n in _DENIED):
        return Outcome("denied", message)
    if any(n in status for n in _NOT_FOUND):
        return Outcome("not_found", message)
    if errors or any(n in status for n in _INVALID):
        return Outcome("invalid", message, errors=errors)
    if any(n in status for n in _PENDING):
        return Outcome("pending", message)
    if value.get("ok") is False or any(n in status for n in _FAILED):
        return Outcome("failed", message)
    rows = find_rows({k: v for k, v in value.items() if k not in ("args", "arguments")})
    has_collection = any(isinstance(v, list) for v in _collections(value))
    if has_collection:
        return Outcome("rows", message, rows=rows)
    return Outcome("done", message, rows=rows)


def _collections(value: dict[str, Any]) -> Iterator[Any]:
    for key in ("rows", "results", "items", "objects", "records", "data"):
        child = value.get(key)
        if isinstance(child, dict):
            yield from _collections(child)
        elif child is not None:
            yield child


def describe_row(row: dict[str, Any]) -> str:
    """`Buy milk (open, high, 2025-06-01)`: the label, then a few short facts."""
    label_key = next((k for k in LABEL_KEYS if isinstance(row.get(k), str) and row[k]), None)
    label = row[label_key] if label_key else f"#{row_id(row)}"
    facts = [
        str(v)
        for k, v in row.items()
        if k not in (label_key, "id", "pk", "description", "url")
        and isinstance(v, str | int | float)
        and not isinstance(v, bool)
        and v != ""
        and len(str(v)) <= 40
    ][:3]
    return f"{label} ({', '.join(facts)})" if facts else str(label)


def plural(noun: str | None, count: int) -> str:
    word = noun or "record"
    if count == 1:
        return word
    return word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"
