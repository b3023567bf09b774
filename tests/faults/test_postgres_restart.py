"""PostgreSQL goes away under the worker and daphne in the middle of a tool call, and comes back.

What the stack's processes see is what a server restart shows them: every connection they hold is
cut, and for a while no new one is accepted. It is done to the test database alone (its connections
are ended with `pg_terminate_backend`, and `ALLOW_CONNECTIONS` is off for the outage) rather than by
restarting the server, because the server may be shared: with `DATABASE_URL` it is not ours to
restart, and the embedded one also serves the suite's own connection and, with `TEST_DATABASE_NAME`,
other test runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from assistant.models import AgentStep
from tests.conftest import wait_for
from tests.faults.conftest import APPLICATION_NAME, Stack, assert_one_reply, assert_page_matches_database
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Done, across the database outage."


class Outage:
    def __init__(self) -> None:
        self.database = connection.settings_dict["NAME"]

    def _admin(self) -> psycopg.Connection[Any]:
        """A connection to the server's maintenance database: a database's own sessions may not close it."""
        params = connection.get_connection_params()
        params.pop("dbname", None)
        params.pop("cursor_factory", None)
        params.pop("context", None)
        return psycopg.connect(**params, dbname="postgres", autocommit=True)

    def begin(self) -> int:
        """Refuse new connections to the test database and cut the stack's; returns how many were cut."""
        with self._admin() as admin:
            admin.execute(f'ALTER DATABASE "{self.database}" WITH ALLOW_CONNECTIONS false')
            cut = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = %s",
                [self.database, APPLICATION_NAME],
            ).fetchone()
            return int(cut[0]) if cut else 0

    def end(self) -> None:
        with self._admin() as admin:
            admin.execute(f'ALTER DATABASE "{self.database}" WITH ALLOW_CONNECTIONS true')


@pytest.fixture
def outage() -> Iterator[Outage]:
    planned = Outage()
    yield planned
    planned.end()  # whatever happened in the test, the database takes connections again


@pytest.mark.parametrize(
    ("tool_seconds", "down_for"),
    [
        # Back while the tool still runs: the tool's transaction died with its connection.
        pytest.param(4.0, 1.5, id="back-before-the-tool-ends"),
        # Still down when the tool ends: the worker cannot even record the outcome, and gives the run up.
        pytest.param(1.0, 3.5, id="down-when-the-tool-ends"),
    ],
)
def test_a_database_outage_mid_run_does_nothing_twice_and_stops_no_process(
    alice: Any, stack: Stack, outage: Outage, tool_seconds: float, down_for: float
) -> None:
    stack.script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "before"}}]},
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "during", "seconds": tool_seconds}}]},
        {"text": REPLY},
    )
    page = stack.socket(alice)
    sent = page.send_message("work through a database restart")
    run_id = sent["run_id"]
    wait_for(lambda: AgentStep.objects.filter(run_id=run_id, tool_name="test_slow_effect", state="started").exists(),
             timeout=15, what="the slow tool to start")

    assert outage.begin() > 0
    time.sleep(down_for)
    outage.end()

    run = stack.wait_for_run(run_id, timeout=40)
    stack.assert_all_alive()
    assert_one_reply(run, REPLY)
    assert Effect.objects.filter(label="before").count() == 1
    # The tool's own transaction was cut with its connection: its effect is gone, and the step says
    # it did not take effect, or that its outcome is not known, rather than claiming it happened.
    interrupted = run.steps.get(tool_name="test_slow_effect")
    assert Effect.objects.filter(label="during").count() == 0
    assert interrupted.took_effect in (None, False), interrupted.result
    assert run.steps.filter(tool_name="test_slow_effect").count() == 1

    # The page's socket may have been dropped with daphne's connection; a reload shows what the database holds.
    reloaded = stack.socket(alice)
    assert_page_matches_database(reloaded.load(), run.chat_id)
    reloaded.close()
    page.close()


def test_a_worker_that_kept_its_connections_across_an_outage_answers_the_next_messages_at_once(
    alice: Any, stack: Stack, outage: Outage
) -> None:
    """Workers keep their database connections from one turn to the next (a new PostgreSQL backend per
    turn cost more than the turn's queries). A restart cuts those idle connections: the next turns must
    notice on their own, as Django's requests do, not fail and wait for the sweeper."""
    stack.script({"text": "Done."})
    page = stack.socket(alice)
    # Enough turns for both pool processes to have worked, and so to hold a connection each.
    for number in range(4):
        run = stack.wait_for_run(page.send_message(f"before {number}")["run_id"], timeout=20)
        assert run.status == "succeeded", (run.status, run.error)

    assert outage.begin() > 0
    outage.end()

    for number in range(4):
        run = stack.wait_for_run(page.send_message(f"after {number}")["run_id"], timeout=20)
        assert run.status == "succeeded", (run.status, run.error)
        # Answered by the worker it was sent to, on its first try: a turn that failed on a dead connection
        # would have been left to the sweeper, which stamps each run it queues again.
        assert (run.requeued_at, run.attempts) == (None, 1), (run.requeued_at, run.attempts)
    stack.assert_all_alive()
    page.close()
