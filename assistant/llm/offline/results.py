"""Reading tool results (whatever JSON the executor sent back) and writing a reply about them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
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
_UNKNOWN = ("unknown",)


@dataclass
class Outcome:
    """What one tool result says, in the few categories a reply distinguishes."""

    kind: str  # done | rows | denied | declined | not_found | invalid | pending | failed | unknown
    message: str = ""  # what the app said (its messages, details): fit to show the person
    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Why nothing happened, as the executor or the loop told the model; it may be addressed to the
    # model ("do not try it again"), so a reply uses it only when the app said nothing itself.
    reason: str = ""
    more: bool = False  # the rows were cut off at the read's limit

    @property
    def explanation(self) -> str:
        return self.message or self.reason


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
    data: dict[str, Any] = value["data"] if isinstance(value.get("data"), dict) else {}
    message = " ".join(
        s
        for source in (value, data)
        for key in ("message", "messages", "detail", "error")
        for s in _strings(source.get(key))
    ).strip()
    reason = " ".join(_strings(value.get("reason"))).strip()
    status = " ".join(
        str(value.get(key, ""))
        for key in ("status", "outcome", "result", "kind", "code")
        if isinstance(value.get(key, ""), str | int)
    ).lower()
    errors = _field_errors(value.get("errors") or value.get("field_errors") or data.get("errors") or {})
    if any(n in status for n in _DECLINED):
        return Outcome("declined", message, reason=reason)
    if any(n in status for n in _DENIED):
        return Outcome("denied", message, reason=reason)
    if any(n in status for n in _NOT_FOUND):
        return Outcome("not_found", message, reason=reason)
    if errors or any(n in status for n in _INVALID):
        return Outcome("invalid", message, errors=errors, reason=reason)
    if any(n in status for n in _PENDING):
        return Outcome("pending", message, reason=reason)
    if any(n in status for n in _UNKNOWN):
        return Outcome("unknown", message, reason=reason)
    if value.get("ok") is False or any(n in status for n in _FAILED):
        return Outcome("failed", message, reason=reason)
    rows = find_rows({k: v for k, v in value.items() if k not in ("args", "arguments")})
    more = any(source.get(key) is True for source in (value, data) for key in ("truncated", "has_more", "more"))
    has_collection = any(isinstance(v, list) for v in _collections(value))
    if has_collection:
        return Outcome("rows", message, rows=rows, reason=reason, more=more)
    return Outcome("done", message, rows=rows, reason=reason)


def _collections(value: dict[str, Any]) -> Iterator[Any]:
    for key in ("rows", "results", "items", "objects", "records", "data"):
        child = value.get(key)
        if isinstance(child, dict):
            yield from _collections(child)
        elif child is not None:
            yield child


def describe_row(
    row: dict[str, Any], labels: Mapping[str, Mapping[str, str]] | None = None, *, with_id: bool = False
) -> str:
    """`Buy milk — status: To do, priority: High, project: Home`: the row's label, then its short facts.

    Facts are named by their field; a stored value is shown by its label when a schema gave one, and a
    related record by its name rather than its id when the row has both (`project` and `project__name`).
    """
    labels = labels or {}
    label_key = next((k for k in LABEL_KEYS if isinstance(row.get(k), str) and row[k]), None)
    label = row[label_key] if label_key else f"#{row_id(row)}"
    if with_id and label_key:
        label = f"{label} (#{row_id(row)})"
    label = linked(str(label), row.get("url"))
    facts: list[str] = []
    named: set[str] = set()
    for key, value in row.items():
        if key in (label_key, "id", "pk", "description", "url") or value is None or value is False or value == "":
            continue
        if isinstance(value, dict | list) or len(str(value)) > 40:
            continue
        field_name = key.split("__", 1)[0]
        if any(other.startswith(key + "__") and row[other] not in (None, "") for other in row):
            continue  # `project: 7` next to `project__name: Home`: the name says it better
        if field_name in named:
            continue
        named.add(field_name)
        shown = field_name.replace("_", " ")
        if value is True:
            facts.append(shown)
            continue
        label_of_value = labels.get(field_name.lower(), {}).get(str(value))
        facts.append(f"{shown}: {_in_sentence(label_of_value) if label_of_value else value}")
    return f"{label} — {', '.join(facts[:5])}" if facts else str(label)


# A page of the site a reply can link to as it is: a path with nothing Markdown would read as the link's end.
_LINKABLE = re.compile(r"/[^\s()<>\\]*")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>!])")


def linked(label: str, url: Any) -> str:
    """`label` as a Markdown link to `url`, the page a tool result gave for the object; as itself without one."""
    if not isinstance(url, str) or not _LINKABLE.fullmatch(url):
        return label
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", label)
    return f"[{text}]({url})"


def _in_sentence(label: str) -> str:
    """"In progress" -> "in progress" to sit inside a sentence; acronyms ("EU") stay as they are."""
    return label if label[:2].isupper() else label[:1].lower() + label[1:]


def plural(noun: str | None, count: int) -> str:
    word = noun or "record"
    if count == 1:
        return word
    return word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"


def facts_of_one(content: str, kind: str) -> str:
    """A read's answer about one thing (counts, one record's details) as a list of its facts, or "".

    A list of records is described row by row elsewhere; this is for the answer that is no list: the
    executor's `data` status with an object holding no collection.
    """
    value = parse_result(content)
    if kind not in ("done", "rows") or not isinstance(value, dict) or value.get("status") != "data":
        return ""
    data = value.get("data")
    if not isinstance(data, dict) or any(isinstance(v, list) for v in data.values()):
        return ""
    inner: dict[str, Any] = data["object"] if isinstance(data.get("object"), dict) else data
    lines = []
    for key, item in inner.items():
        if key in ("id", "pk", "messages") or item in (None, "", {}, []):
            continue
        if isinstance(item, dict):
            shown = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in item.items() if not isinstance(v, dict | list))
        elif isinstance(item, list):
            continue
        else:
            shown = "yes" if item is True else "no" if item is False else str(item)
        lines.append(f"- {key.replace('_', ' ')}: {shown}")
    return "\n".join(lines)
