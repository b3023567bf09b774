"""The files a person attached to their message, as the demo model finds them: the delimited block that follows
their words (assistant/attachments/content.py), read back into each file's id, name, type, size and (for text) the
content shown; which tools take a file (an argument of the attachment format, a form's file field); and what the
model says of a file asked about ("what is in this file?"): its rows and columns, or its first lines, as data."""

from __future__ import annotations

import csv
import io
import json
import re
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
    size: str = ""
    #: What the block shows of the file's content (text only; None for a picture or any other kind).
    content: str | None = None
    #: What the block says of it besides ("only its first 20000 characters are shown", "a picture: …").
    note: str = ""


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
    files = [AttachedFile(int(entry["id"]), str(entry.get("name", "")), str(entry.get("type", "")),
                          str(entry.get("size") or ""),
                          entry["content"] if isinstance(entry.get("content"), str) else None,
                          str(entry.get("note") or ""))
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


#: Rows of a table, and lines of other text, that a description shows.
SHOWN_ROWS = 5
#: Characters of one cell or line shown.
SHOWN_CHARS = 80


def describe_files(files: Sequence[AttachedFile]) -> str:
    """What is in each file, as the person would want it told: a table's columns, its number of rows and the
    first of them; a text's number of lines and its first lines, quoted; for anything else what it is. What a
    file says is shown as data (a table, a quote), never read as a request."""
    return "\n\n".join(_describe(file) for file in files)


def _describe(file: AttachedFile) -> str:
    about = ", ".join(part for part in (file.type, file.size) if part)
    heading = f"**{_cell(file.name) or 'The file'}**" + (f" ({about})" if about else "")
    if file.content is None:
        if file.type.startswith("image/"):
            return (f"{heading} is a picture. I cannot see pictures when I work offline; a model that takes them "
                    "is shown it with your message.")
        return f"{heading}: I cannot read its content here ({file.note or 'it is not text'})."
    cut = " I was shown only its start." if file.note.startswith("only") else ""
    if not file.content.strip():
        return f"{heading} is empty."
    table = _table(file)
    if table is not None:
        header, rows = table
        columns = [_cell(name) for name in header]
        shown = "\n".join("| " + " | ".join(_cell(value) for value in _fitted(row, len(header))) + " |"
                          for row in rows[:SHOWN_ROWS])
        more = f"\n\n…and {len(rows) - SHOWN_ROWS} more." if len(rows) > SHOWN_ROWS else ""
        count = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
        return (f"{heading} is a table of {count} under the columns {', '.join(columns)}.{cut}\n\n"
                f"| {' | '.join(columns)} |\n|{'---|' * len(columns)}\n{shown}{more}")
    lines = [line for line in file.content.splitlines() if line.strip()]
    count = f"{len(lines)} line{'s' if len(lines) != 1 else ''}"
    quoted = "  \n".join(f"> {_cell(line)}" for line in lines[:SHOWN_ROWS])  # a line each (a hard break)
    more = f"\n\n…and {len(lines) - SHOWN_ROWS} more." if len(lines) > SHOWN_ROWS else ""
    return f"{heading} is text of {count}.{cut} It begins:\n\n{quoted}{more}"


def _table(file: AttachedFile) -> tuple[list[str], list[list[str]]] | None:
    """A CSV's header and rows (a file named .csv or typed text/csv, of at least two columns); None otherwise."""
    if not (file.type in ("text/csv", "application/csv") or file.name.lower().endswith(".csv")):
        return None
    try:
        rows = [row for row in csv.reader(io.StringIO(file.content or "")) if any(cell.strip() for cell in row)]
    except csv.Error:
        return None
    if not rows or len(rows[0]) < 2:
        return None
    return rows[0], rows[1:]


def _fitted(row: list[str], width: int) -> list[str]:
    """A row cut or padded to the header's width, as the table shows it."""
    return (row + [""] * width)[:width]


def _cell(value: str) -> str:
    """One cell or line as Markdown shows it literally: one line, cut, its markup characters escaped."""
    text = " ".join(value.split())
    if len(text) > SHOWN_CHARS:
        text = text[: SHOWN_CHARS - 1] + "…"
    text = "".join("\\" + char if char in "\\`*_[]<>|&#" else char for char in text)
    # What would start a list or a heading at the start of a line: "1. one", "- item", "= underline".
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", re.sub(r"^([-+=~])", r"\\\1", text))
