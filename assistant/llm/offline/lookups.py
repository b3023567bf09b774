"""The lookups of the offline model's plans: the id of a record the person named, found with a read tool
before the tool they asked for is called."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..types import ToolCall
from .results import describe_row, match_rows, read_outcome, row_id
from .schema import ToolInfo


@dataclass(frozen=True)
class Lookup:
    """Find the id of the `noun` called `name` with the read tool `tool`, for argument `prop`."""

    prop: str
    noun: str
    name: str
    tool: ToolInfo
    arguments: dict[str, Any]


def reader_for(noun: str, infos: list[ToolInfo]) -> ToolInfo | None:
    readers = [info for info in infos if info.is_read and noun in info.nouns]
    # The most specific reader: `project_list` rather than `project_member_list`.
    return min(readers, key=lambda info: len(info.nouns)) if readers else None


def lookup_arguments(reader: ToolInfo, name: str) -> dict[str, Any]:
    if reader.search_field:
        return {reader.search_field: name}
    for prop in ("name", "title", "label"):
        if prop in reader.properties:
            return {prop: name}
    return {}


def find_call(made: list[ToolCall], name: str, arguments: dict[str, Any]) -> ToolCall | None:
    return next((call for call in made if call.name == name and call.arguments == arguments), None)


def resolve(lookup: Lookup, content: str) -> tuple[Any, str]:
    outcome = read_outcome(content)
    if outcome.kind in ("denied", "failed", "invalid", "declined"):
        detail = f" ({outcome.message})" if outcome.message else ""
        return None, f"I couldn't look up the {lookup.noun} “{lookup.name}”{detail}."
    matches = match_rows(outcome.rows, lookup.name)
    if not matches:
        return None, f"I couldn't find a {lookup.noun} called “{lookup.name}”. Nothing was changed."
    ids = sorted({str(row_id(row)) for row in matches})
    if len(ids) > 1:
        listing = "; ".join(describe_row(row, lookup.tool.labels, with_id=True) for row in matches[:5])
        return None, (
            f"More than one {lookup.noun} matches “{lookup.name}”: {listing}. "
            f"Which one? You can give its number, e.g. {lookup.noun} {ids[0]}."
        )
    return row_id(matches[0]), ""
