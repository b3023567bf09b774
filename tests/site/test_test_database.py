"""The suite's test database empties cleanly even while someone else is still writing to it.

A transactional test ends with a flush of every table (tests/postgresql/). A browser test's server or the
suite's worker can still be saving a row as the test ends; if that row points at a person the flush has
already deleted, the flush failed at commit, the test errored in its teardown, and the next test found the
last one's people still there ("alice already exists"). Here a second connection writes a person's chat,
holding the person's row as a writer that checked its owner does, and commits while the flush is part way
through; the flush must still leave every table empty.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.core.management.color import no_style
from django.db import connection, connections

from assistant.models import AgentChat
from tests.conftest import _test_database_url, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flush_waits_for_a_writer_still_saving_a_row_that_points_at_a_person() -> None:
    alice = get_user_model().objects.create_user("alice", password="pw")
    chat_saved = threading.Event()
    may_commit = threading.Event()
    flush_errors: list[BaseException] = []

    def late_writer() -> None:
        try:
            with psycopg.connect(_test_database_url()) as writer, writer.transaction():
                writer.execute(
                    "INSERT INTO assistant_agentchat (owner_id, spec, channel, title, created_at, updated_at,"
                    " last_activity_at) VALUES (%s, 'default', 'panel', 'late', now(), now(), now())", [alice.pk])
                writer.execute("SELECT 1 FROM auth_user WHERE id = %s FOR KEY SHARE", [alice.pk])
                chat_saved.set()
                may_commit.wait(60)
        finally:
            chat_saved.set()

    def flush() -> None:
        try:
            # What a transactional test's teardown runs, with the tables in a fixed order: the chats before
            # the people, so the writer commits in between (flush's own order changes from run to run).
            tables = sorted(connection.introspection.django_table_names(only_existing=True, include_views=False))
            connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), tables))
        except BaseException as error:  # handed to the test's thread, which fails with it
            flush_errors.append(error)
        finally:
            connections.close_all()

    writer = threading.Thread(target=late_writer)
    writer.start()
    chat_saved.wait(60)
    flusher = threading.Thread(target=flush)
    flusher.start()

    def flush_is_waiting_on_a_lock() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                           " AND wait_event_type = 'Lock'")
            return cursor.fetchone()[0] > 0

    # The flush has emptied the chats (the uncommitted one unseen) and waits to delete alice.
    wait_for(flush_is_waiting_on_a_lock, what="the flush to wait for the writer's transaction")
    may_commit.set()
    writer.join(60)
    flusher.join(60)

    assert not flush_errors, f"the flush failed: {flush_errors[0]!r}"
    assert not get_user_model().objects.exists()
    assert not AgentChat.objects.exists()
