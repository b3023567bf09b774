"""The worker is SIGKILLed (with its pool) in the middle of a tool call, as a crash or the OOM killer would."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from assistant.models import AgentMessage, AgentStep
from tests.conftest import wait_for
from tests.faults.conftest import Stack, assert_one_reply, assert_page_matches_database
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Finished after the crash."


def test_a_killed_worker_resumes_the_run_without_doing_anything_twice(alice: Any, stack: Stack) -> None:
    stack.script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "before"}}]},
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "during", "seconds": 5}}]},
        {"text": REPLY},
    )
    page = stack.socket(alice)
    sent = page.send_message("survive a crash")
    run_id = sent["run_id"]
    wait_for(lambda: AgentStep.objects.filter(run_id=run_id, tool_name="test_slow_effect", state="started").exists(),
             timeout=15, what="the slow tool to start")

    killed_at = timezone.now()
    stack.worker.kill()
    stack.worker.start()
    run = stack.wait_for_run(run_id, timeout=30)
    # The lease (3 s here) runs out, a sweep puts the run back, the new worker takes it up: the sweep did,
    # not the broker handing the killed task out again by itself (after its visibility timeout).
    assert run.requeued_at is not None and run.requeued_at > killed_at

    assert_one_reply(run, REPLY)
    assert run.attempts == 2
    assert Effect.objects.filter(label="before").count() == 1  # the completed step was not redone
    assert Effect.objects.filter(label="during").count() == 0  # its transaction died with the worker
    interrupted = run.steps.get(tool_name="test_slow_effect")
    assert interrupted.result["status"] == "unknown" and interrupted.took_effect is None
    assert run.steps.filter(tool_name="test_slow_effect").count() == 1  # not blindly run again
    assert AgentMessage.objects.filter(run=run, role="user").get().content == "survive a crash"
    stack.assert_all_alive()

    # The page never lost its socket: it got the answer live, and a reload shows the same.
    replied = page.wait_for(lambda event: event["type"] == "assistant.replied", timeout=10)
    assert replied["message"]["content"] == REPLY
    assert_page_matches_database(page.load(), run.chat_id)
    page.close()
