"""Nothing a model sends can crash a run. Output that cannot be stored as it is (PostgreSQL refuses NUL and
unpaired surrogates in text and jsonb, columns have lengths, jsonb has no NaN) reaches the model as an
`invalid` result it can correct, or is stored with replacement characters when it is only text; the run
goes on. Through the real worker and database; the model is a script or the fake OpenAI server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.llm.remote import parse_arguments
from assistant.models import AgentMessage, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp.models import Effect

RECORD = "test_record_effect"
FIXED = {"name": RECORD, "arguments": {"label": "fixed"}}


def send(user: Any, text: str, model: str) -> AgentRun:
    with assistant_settings_with(MODEL=model):
        return chat_send(user=user, content=text).run


def tool_steps(run: AgentRun) -> list[AgentStep]:
    return list(run.steps.filter(kind="tool_call").order_by("seq"))


UNSTORABLE_CALLS = {
    "tool name over 200 characters": {"name": "t" * 201, "arguments": {"label": "x"}},
    "NUL in a tool name": {"name": "test_record\x00_effect", "arguments": {"label": "x"}},
    "NUL in an argument": {"name": RECORD, "arguments": {"label": "a\x00b"}},
    "NUL in an argument's name": {"name": RECORD, "arguments": {"lab\x00el": "x"}},
    "lone surrogate in an argument": {"name": RECORD, "arguments": {"label": "\ud800"}},
    "number that is not finite": {"name": RECORD, "arguments": {"label": "x", "n": float("nan")}},
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.parametrize("bad_call", UNSTORABLE_CALLS.values(), ids=UNSTORABLE_CALLS.keys())
def test_a_call_that_cannot_be_stored_is_answered_invalid_and_the_run_goes_on(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str], bad_call: dict[str, Any]
) -> None:
    model = script({"tool_calls": [bad_call]}, {"tool_calls": [FIXED]}, {"text": "Fixed it."})
    run = wait_for_run(send(alice, "record something", model).pk, *AgentRun.ENDED_STATUSES)

    assert (run.status, run.reply) == ("succeeded", "Fixed it."), (run.stop_reason, run.error)
    refused, fixed = tool_steps(run)
    assert (refused.result["status"], refused.took_effect) == ("invalid", False)
    assert refused.reason  # the model is told what to correct
    assert len(refused.tool_name) <= 200
    assert (fixed.result["status"], fixed.took_effect) == ("done", True)
    assert list(Effect.objects.values_list("label", flat=True)) == ["fixed"]  # the refused call did nothing
    # What the model was told about its call is what the step shows.
    assert run.steps.filter(kind="model_call").count() == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_nul_in_an_argument_is_refused_by_the_rule_every_channel_has_naming_the_argument(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    """The rule MCP and the executor apply (assistant.tools.validation.nul_errors): the model is told which
    argument holds the NUL, as an invalid call, and nothing is done."""
    model = script({"tool_calls": [{"name": RECORD, "arguments": {"label": "milk\x00bread"}}]}, {"text": "Sorry."})
    run = wait_for_run(send(alice, "record something", model).pk, *AgentRun.ENDED_STATUSES)

    (refused,) = tool_steps(run)
    assert (refused.result["status"], refused.took_effect) == ("invalid", False)
    assert "label must not contain NUL characters" in refused.reason, refused.reason
    assert not Effect.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_call_id_over_200_characters_runs_under_an_id_the_server_made(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"id": "x" * 300, "name": RECORD, "arguments": {"label": "long id"}}]},
                   {"text": "Recorded."})
    run = wait_for_run(send(alice, "record it", model).pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.reply) == ("succeeded", "Recorded."), run.error
    (step,) = tool_steps(run)
    assert 0 < len(step.call_id) <= 200 and step.result["status"] == "done"
    assert Effect.objects.filter(label="long id").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_text_with_nul_or_a_lone_surrogate_is_stored_with_replacement_characters(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    sent = send(alice, "say something odd", script({"text": "one\x00two \ud800three"}))
    run = wait_for_run(sent.pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.reply) == ("succeeded", "one\ufffdtwo \ufffdthree"), run.error
    assert AgentMessage.objects.get(run=run, role="assistant").content == run.reply


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_streamed_openai_answer_that_cannot_be_stored_is_corrected_and_the_run_goes_on(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(
        # NUL in the arguments, an unpaired surrogate in the text, and token counts no column can hold.
        openai_stream(["about to \ud800 record"], [("call_bad", RECORD, {"label": "a\x00b"})], usage=(-7, -3)),
        openai_stream([], [("call_good", RECORD, {"label": "fixed"})]),
        openai_stream(["Fixed ", "it."]),
    )
    run = wait_for_run(send(alice, "record something", "openai:fake-gpt").pk, *AgentRun.ENDED_STATUSES)

    assert (run.status, run.reply) == ("succeeded", "Fixed it."), (run.stop_reason, run.error)
    refused, fixed = tool_steps(run)
    assert refused.result["status"] == "invalid" and fixed.result["status"] == "done"
    assert list(Effect.objects.values_list("label", flat=True)) == ["fixed"]
    first_call = run.steps.filter(kind="model_call").order_by("seq").first()
    assert first_call.result["text"] == "about to \ufffd record"
    assert (first_call.prompt_tokens, first_call.completion_tokens) == (0, 0)
    # The model saw its refused call and why, paired with the call it made.
    second_request = fake_openai.bodies[1]["messages"]
    answered = [message for message in second_request if message["role"] == "tool"]
    assert len(answered) == 1 and json.loads(answered[0]["content"])["status"] == "invalid"


@pytest.mark.parametrize(
    "raw",
    ["[" * 50_000 + "]" * 50_000, '{"n": ' + "9" * 5000 + "}", '{"a": 1', "[1, 2]"],
    ids=["nested 50,000 deep", "an integer of 5,000 digits", "cut short", "not an object"],
)
def test_arguments_a_provider_cannot_parse_become_invalid_arguments_not_an_exception(raw: str) -> None:
    arguments, invalid = parse_arguments(raw)
    assert (arguments, invalid) == ({}, raw)
