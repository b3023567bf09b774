"""The migration that stopped storing session keys in clear keeps the runs that can still act working:
their key is sealed and digested, the clear column is gone, and the migration undoes itself."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from assistant.access.authority import SentFrom, session_acts_as
from assistant.conversation.services import session_runs_end
from assistant.models import AgentRun

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("assistant", "0010_memory_recall_index")]
CONVERTED = [("assistant", "0011_run_session_sealed")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrates the test database to `targets`; the apps (historical models) as they are there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest() -> list[tuple[str, str]]:
    """Every app's newest migration: going back in `assistant` also unapplies the migrations of the apps that
    depend on it (the MCP app's), which the test database must have again afterwards."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_runs_that_may_still_act_keep_their_session_through_the_migration_and_back(alice: Any) -> None:
    browser = Client()
    browser.force_login(alice)
    key = browser.cookies["sessionid"].value
    newest = latest()
    try:
        old = migrate(BEFORE)
        chat = old.get_model("assistant", "AgentChat").objects.create(owner_id=alice.pk)
        other_chat = old.get_model("assistant", "AgentChat").objects.create(owner_id=alice.pk)
        runs = old.get_model("assistant", "AgentRun").objects
        waiting = runs.create(owner_id=alice.pk, chat=chat, status="awaiting_confirmation", session_key=key,
                              client_address="203.0.113.9", client_origin="http://127.0.0.1:8000")
        ended = runs.create(owner_id=alice.pk, chat=other_chat, status="succeeded", session_key=key)
        without = runs.create(owner_id=alice.pk, chat=other_chat, status="queued", session_key="")

        migrate(CONVERTED)
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_jsonb(run)::text FROM assistant_agentrun AS run")
            assert not [row for (row,) in cursor.fetchall() if key in row]

        # Back: the clear column again, holding the key of the run that may act.
        old = migrate(BEFORE)
        assert old.get_model("assistant", "AgentRun").objects.get(pk=waiting.pk).session_key == key
    finally:
        migrate(newest)
    # Every app's tables are as the code has them again, the MCP app's too, for the tests after this one.
    executor = MigrationExecutor(connection)
    assert not executor.migration_plan(executor.loader.graph.leaf_nodes())

    run = AgentRun.objects.get(pk=waiting.pk)
    sent_from = SentFrom.of_run(run)
    assert (sent_from.session_key, sent_from.client_address, sent_from.origin) == (
        key, "203.0.113.9", "http://127.0.0.1:8000")
    assert session_acts_as(sent_from.session_key, alice.pk)  # the live check still passes
    assert SentFrom.of_run(AgentRun.objects.get(pk=without.pk)) is None
    assert AgentRun.objects.get(pk=ended.pk).session_digest == ""  # an ended run keeps nothing of its session
    # Logging out finds it by its digest and ends it.
    browser.post("/logout/")
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")
    assert session_runs_end(session_key=key) == []
