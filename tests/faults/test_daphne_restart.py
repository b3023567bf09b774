"""daphne restarts while a run works: the page's socket drops, the page reconnects and reloads, and
from then on it sees the run as the database does, up to the reply."""

from __future__ import annotations

from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from assistant.models import AgentStep
from tests.conftest import wait_for
from tests.faults.conftest import Stack, assert_one_reply, assert_page_matches_database
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Done, while the web server restarted."


def test_a_page_reconnects_after_a_daphne_restart_and_sees_the_run_finish(alice: Any, stack: Stack) -> None:
    stack.script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "before"}}]},
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "during", "seconds": 3}}]},
        {"text": REPLY},
    )
    page = stack.socket(alice)
    sent = page.send_message("work through a web server restart")
    run_id = sent["run_id"]
    wait_for(lambda: AgentStep.objects.filter(run_id=run_id, tool_name="test_slow_effect", state="started").exists(),
             timeout=15, what="the slow tool to start")

    stack.daphne.stop()
    with pytest.raises(ConnectionClosed):
        page.wait_for(lambda event: False, timeout=5)  # the page notices its socket is gone
    stack.daphne.start()

    # The page's script reconnects with the same session and reloads.
    page.reconnect()
    loaded = page.load()
    assert_page_matches_database(loaded, sent["chat_id"])
    if loaded["active_run"] is not None:
        # Still working: the steps so far are shown, and the rest of the run arrives live on the new socket.
        assert loaded["active_run"]["id"] == run_id
        shown = [(step["seq"], step["tool_name"]) for step in loaded["steps"]]
        stored = AgentStep.objects.filter(run_id=run_id, seq__lte=shown[-1][0]).order_by("seq")
        assert shown == list(stored.values_list("seq", "tool_name"))
        assert "test_record_effect" in dict(shown).values()
        replied = page.wait_for(lambda event: event["type"] == "assistant.replied", timeout=20)
        assert replied["run_id"] == run_id and replied["message"]["content"] == REPLY

    run = stack.wait_for_run(run_id, timeout=20)
    assert_one_reply(run, REPLY)
    assert run.attempts == 1  # the worker never noticed
    assert Effect.objects.filter(label="before").count() == 1
    assert Effect.objects.filter(label="during").count() == 1
    assert_page_matches_database(page.load(), run.chat_id)
    stack.assert_all_alive()
    page.close()
