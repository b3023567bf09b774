"""The files a person attached to their message, as the demo model finds them: the delimited block that follows
their words (assistant/attachments/content.py), read back into each file's id, name and type; and which tools take
a file (an argument of the attachment format, a form's file field)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..types import ATTACHMENT_FORMAT, ToolSpec

START, END = "<attachments>", "</attachments>"


@dataclass(frozen=True)
class AttachedFile:
    id: int
    name: str
    type: str


def split_files(content: str) -> tuple[str, list[AttachedFile]]:
    """The person's own words, and the files attached to them (none when there is no block)."""
    start = content.find(START)
    end = content.find(END, start)
    if start < 0 or end < 0:
        return content, []
    block = content[start + len(START):end].strip().splitlines()
    words = (content[:start] + content[end + len(END):]).strip()
    try:
        described = json.loads(block[-1]) if block else []
    except json.JSONDecodeError:
        return words, []
    files = [AttachedFile(int(entry["id"]), str(entry.get("name", "")), str(entry.get("type", "")))
             for entry in described if isinstance(entry, dict) and isinstance(entry.get("id"), int)]
    return words, files


def file_arguments(tool: ToolSpec) -> list[str]:
    """The tool's arguments that name a file, required ones first."""
    properties: dict[str, Any] = (tool.parameters or {}).get("properties") or {}
    required = set((tool.parameters or {}).get("required") or ())
    named = [name for name, schema in properties.items() if (schema or {}).get("format") == ATTACHMENT_FORMAT]
    return sorted(named, key=lambda name: name not in required)


def needs_a_file(tool: ToolSpec) -> bool:
    """Whether the tool cannot be called without a file (a required file argument)."""
    required = set((tool.parameters or {}).get("required") or ())
    return any(name in required for name in file_arguments(tool))


def usable(tools: Sequence[ToolSpec], files: Sequence[AttachedFile]) -> list[ToolSpec]:
    """The tools a request can use: one that needs a file only when a file was attached."""
    return list(tools) if files else [tool for tool in tools if not needs_a_file(tool)]
