"""Valkey (the broker, the channel layer and the cache) restarts while a run is in the middle of a tool
call, and a second person sends a message while it is down."""

from __future__ import annotations

import time
from typing import Any

import pytest

from assistant.models import AgentMessage, AgentStep
from tests.conftest import wait_for
from tests.faults.conftest import Stack, assert_one_reply, assert_page_matches_database
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Done, across the restart."


def test_a_valkey_restart_mid_run_stops_no_process_and_loses_no_run(
    alice: Any, bob: Any, user_factory: Any, stack: Stack
) -> None:
    stack.script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "before"}}]},
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "during", "seconds": 4}}]},
        {"text": REPLY},
    )
    alices_page, bobs_page = stack.socket(alice), stack.socket(bob)
    sent = alices_page.send_message("work through a broker restart")
    assert sent["type"] == "assistant.sent", sent
    in_flight = sent["run_id"]
    wait_for(lambda: AgentStep.objects.filter(run_id=in_flight, tool_name="test_slow_effect", state="started").exists(),
             timeout=15, what="the slow tool to start")

    stack.valkey.stop()
    outage_started = time.monotonic()
    # Bob sends while the broker is down: however the page answers him, his message must be kept and
    # answered once the broker is back.
    bobs_page.send({"type": "assistant.send", "content": "sent during the outage"})
    asked = wait_for(lambda: AgentMessage.objects.filter(owner=bob, content="sent during the outage").first(),
                     timeout=10, what="bob's message to be stored")
    time.sleep(max(0.0, 2.0 - (time.monotonic() - outage_started)))
    stack.valkey.start()

    first = stack.wait_for_run(in_flight, timeout=30)
    stack.assert_all_alive()
    assert_one_reply(first, REPLY)
    assert first.attempts == 1  # the worker that started it finished it
    # Alice's page kept its socket through the outage and sees the answer arrive.
    replied = alices_page.wait_for(lambda event: event["type"] == "assistant.replied", timeout=10)
    assert replied["run_id"] == in_flight
    second = stack.wait_for_run(asked.run_id, timeout=30)
    assert_one_reply(second, REPLY)
    for person in (alice, bob):
        assert Effect.objects.filter(owner=person, label="before").count() == 1
        assert Effect.objects.filter(owner=person, label="during").count() == 1
    stack.assert_all_alive()

    # After the outage the site works as before: a new message is acknowledged and answered live.
    carol = user_factory("carol")
    carols_page = stack.socket(carol)
    after = carols_page.send_message("and after the restart?")
    assert after["type"] == "assistant.sent", after
    carols_reply = carols_page.wait_for(lambda event: event["type"] == "assistant.replied", timeout=20)
    assert carols_reply["message"]["content"] == REPLY
    carols_page.close()

    # Both pages, reloaded as the page's script does after a dropped socket, show what the database holds.
    for person, run in ((alice, first), (bob, second)):
        page = stack.socket(person)
        assert_page_matches_database(page.load(), run.chat_id)
        page.close()
    alices_page.close()
    bobs_page.close()
    # Nothing is left for the broker to hand out again later.
    broker = stack.valkey.client()
    wait_for(lambda: broker.hlen("unacked") == 0, timeout=10, what="every delivery to be acknowledged")
