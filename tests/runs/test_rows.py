"""Rows written together (assistant/runs/rows.py) are stored exactly as `save()` stores them, show in the query log
like any other statement, and a value a column refuses writes none of them."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.runs.rows import WRITE_ALWAYS, write_together

pytestmark = pytest.mark.django_db(transaction=True)

ODD_TEXT = "‮rtl‬ 🧪 e\u0301 'quoted' \"double\" \\back %s %(name)s $1 ? ;-- DROP"
ODD_JSON: dict[str, Any] = {
    "text": ODD_TEXT, "big": 2**62, "negative": -(2**40), "float": 1.5e-300, "none": None, "flag": False,
    "nested": [[{"deep": ["x", 1, None, {"": "empty key"}]}]], "unicode key ✓": "💬",
}
WHEN = datetime.datetime(2026, 3, 29, 1, 30, 15, 123456,
                         tzinfo=datetime.timezone(datetime.timedelta(hours=-9, minutes=-30)))


def _rows(owner: Any) -> tuple[AgentChat, AgentRun, AgentMessage, AgentStep]:
    chat = AgentChat(owner=owner, title=ODD_TEXT[:200], last_activity_at=WHEN)
    run = AgentRun(owner=owner, chat=chat, spec="default", config={"settings": ODD_JSON}, task=ODD_TEXT,
                   session_sealed=bytes(range(256)), started_at=WHEN)
    message = AgentMessage(chat=chat, owner=owner, role=AgentMessage.Role.USER, content=ODD_TEXT, run=run,
                           created_at=WHEN)
    step = AgentStep(run=run, seq=2**31 - 1, kind=AgentStep.Kind.TOOL_CALL, state=AgentStep.State.STARTED,
                     tool_name="tracker_task_create", call_id="call ✓ 1", arguments=ODD_JSON, result=None,
                     took_effect=None, reason=ODD_TEXT, duration_ms=None, created_at=WHEN)
    return chat, run, message, step


def _stored(row: Any) -> dict[str, Any]:
    """The row as the database holds it, without its own key and the keys it was given."""
    fresh = type(row).objects.get(pk=row.pk)
    skip = {"id", "chat", "run", "owner"}
    return {field.name: getattr(fresh, field.attname) for field in fresh._meta.concrete_fields
            if field.name not in skip}


def test_rows_written_together_are_stored_as_save_stores_them(alice: Any) -> None:
    together = _rows(alice)
    written = write_together(guard=WRITE_ALWAYS, guard_params=(), inserts=together[:3])
    assert written.answer is True
    together[3].run = together[1]  # the key the run was just given, as save() would take it
    write_together(guard=WRITE_ALWAYS, guard_params=(), inserts=[together[3]])

    saved = _rows(alice)
    for row in saved:
        for field in ("chat", "run"):
            if hasattr(row, f"{field}_id"):
                setattr(row, field, getattr(row, field))  # the key its parent was given a moment ago
        row.save()
    for mine, theirs in zip(together, saved, strict=True):
        stamped = {field.name for field in type(mine)._meta.concrete_fields  # the moment each was written
                   if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)}
        expected = {name: value for name, value in _stored(theirs).items() if name not in stamped}
        got = _stored(mine)
        assert {name: got[name] for name in expected} == expected, type(mine).__name__
    assert AgentStep.objects.get(pk=together[3].pk).arguments == ODD_JSON
    assert AgentMessage.objects.get(pk=together[2].pk).created_at == WHEN


def test_a_write_shows_in_the_query_log_with_its_values(alice: Any) -> None:
    chat, run, message, _ = _rows(alice)
    with CaptureQueriesContext(connection) as queries:
        write_together(guard=WRITE_ALWAYS, guard_params=(), inserts=[chat, run, message])
    (logged,) = [query["sql"] for query in queries.captured_queries if '"assistant_agentmessage"' in query["sql"]]
    assert logged.startswith("WITH")
    assert "rtl" in logged  # the values, not placeholders: what an operator reading the log needs


def test_a_value_its_column_refuses_writes_none_of_the_rows(alice: Any) -> None:
    chat, run, message, _ = _rows(alice)
    run.spec = "s" * 500  # longer than the column allows: refused, never cut short
    with pytest.raises(DataError), transaction.atomic():
        write_together(guard=WRITE_ALWAYS, guard_params=(), inserts=[chat, run, message])
    assert chat.pk is None and run.pk is None and message.pk is None
    assert not AgentChat.objects.filter(owner=alice).exists()
    assert not AgentRun.objects.filter(owner=alice).exists()
