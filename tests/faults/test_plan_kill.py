"""The worker is SIGKILLed between two steps of a plan: the plan goes on from its last done step."""

from __future__ import annotations

from typing import Any

import pytest

from assistant.models import AgentPlan, AgentStep
from tests.conftest import wait_for
from tests.faults.conftest import Stack, assert_one_reply
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_killed_inside_a_plan_resumes_it_from_its_last_done_step(alice: Any, stack: Stack) -> None:
    stack.script(
        {"tool_calls": [{"name": "assistant_plan", "arguments": {"steps": [
            {"do": "Record one", "tool": "test_record_effect"},
            {"do": "Record two, slowly", "tool": "test_slow_effect"},
            {"do": "Record three", "tool": "test_record_effect"},
        ]}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "one"}}]},
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "two", "seconds": 5}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "three"}}]},
        {"text": "Recorded one and three; two may not have happened."},
    )
    page = stack.socket(alice)
    run_id = page.send_message("record three things")["run_id"]
    wait_for(lambda: AgentStep.objects.filter(run_id=run_id, tool_name="test_slow_effect", state="started").exists(),
             timeout=15, what="the plan's slow step to start")

    stack.worker.kill()
    stack.worker.start()
    run = stack.wait_for_run(run_id, timeout=30)

    assert_one_reply(run, "Recorded one and three; two may not have happened.")
    assert [Effect.objects.filter(label=label).count() for label in ("one", "two", "three")] == [1, 0, 1]
    [plan] = AgentPlan.objects.filter(run=run)
    # Step one stayed done, step two's outcome is unknown (so it failed, saying so), step three was done after.
    assert [step["status"] for step in plan.steps] == ["done", "failed", "done"]
    assert "unknown" in plan.steps[1]["why"] or "stopped before it finished" in plan.steps[1]["why"]
    assert run.steps.filter(tool_name="test_record_effect").count() == 2
    stack.assert_all_alive()
    page.close()
