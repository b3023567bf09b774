"""Runs as CSV rows, for the run list's export: every column staff review, a member's task as its question,
the counters blank while a run is active, and no cell a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from assistant.conf import assistant_settings
from assistant.models import AgentRun
from assistant.review.timeline import with_question

CSV_COLUMNS = (
    "id", "created_at", "finished_at", "owner", "chat", "spec", "parent_id", "root_id", "depth", "model",
    "status", "stop_reason", "error", "question", "reply", "model_calls", "tool_calls", "tool_errors",
    "prompt_tokens", "completion_tokens", "total_tokens", "duration_ms", "quality_score", "feedback_comment",
    "cost", "currency",
)
#: Counters a run totals only when it ends: blank in the CSV while it is active.
_COUNTERS = frozenset({"model_calls", "tool_calls", "tool_errors", "prompt_tokens", "completion_tokens",
                       "total_tokens", "duration_ms", "cost", "currency"})
# A cell starting with one of these is run as a formula by spreadsheet programs; a reply, an error or a
# question is anyone's text, so such a cell is written as text (OWASP's advice: a leading quote).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    return "'" + text if isinstance(value, str) and text.startswith(_FORMULA_STARTS) else text


def runs_csv_rows(runs: QuerySet[AgentRun], chunk_size: int = 500) -> Iterator[list[str]]:
    """The header, then one row per run of `runs`, in its order, read in chunks (for a streamed answer)."""
    yield list(CSV_COLUMNS)
    for run in with_question(runs.select_related("owner")).iterator(chunk_size=chunk_size):
        values: dict[str, Any] = {name: getattr(run, name) for name in CSV_COLUMNS if hasattr(run, name)}
        values["owner"] = run.owner.get_username()
        values["chat"] = run.chat_id
        # Its own model calls' cost, exact (a Decimal's digits), in the currency of the prices; blank with no price.
        values["currency"] = assistant_settings.CURRENCY if run.cost is not None else None
        if run.parent_id is not None:  # a member's run is asked its task, not a message of the chat
            values["question"] = run.task
        if run.is_active:
            values.update(dict.fromkeys(_COUNTERS))
        yield [_cell(values.get(name)) for name in CSV_COLUMNS]


def runs_csv_lines(runs: QuerySet[AgentRun]) -> Iterator[str]:
    """`runs_csv_rows` as the lines of a CSV file, one at a time, for a streamed answer."""
    writer = csv.writer(_Echo())
    return (writer.writerow(row) for row in runs_csv_rows(runs))


class _Echo:
    """A file-like object whose write returns what it was given: csv.writer then yields lines to stream."""

    def write(self, value: str) -> str:
        return value
