"""The openai adapter against a fake Chat Completions server on loopback: real SDK, real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.test import override_settings

from assistant.llm import Message, ModelError, ToolCall, get_model
from assistant.testing.providers import (
    FakeOpenAIServer,
    Reply,
    error_reply,
    openai_completion,
    openai_stream,
    provider_settings,
)
from tests.tracker_tools import TASK_CREATE, TASK_LIST

CONVERSATION = [
    Message.system("You act as the signed-in user."),
    Message.user("create a task 'Buy milk' in Home"),
    Message.assistant("", [ToolCall("call_1", "tracker_project_list", {"search": "Home"})]),
    Message.tool("call_1", json.dumps({"status": "ok", "rows": [{"id": 7, "name": "Home"}]})),
]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with (
        FakeOpenAIServer() as fake,
        override_settings(
            ASSISTANT=provider_settings(
                local={"kind": "openai", "base_url": fake.base_url, "api_key": "sk-test"},
            )
        ),
    ):
        yield fake


def test_request_carries_system_prompt_tools_and_tool_results(server: FakeOpenAIServer) -> None:
    server.queue(openai_completion("Done."))
    get_model("local:fake-gpt").call_tools(CONVERSATION, [TASK_LIST, TASK_CREATE])

    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.body
    assert body["model"] == "fake-gpt"
    assert body["messages"][0] == {"role": "system", "content": "You act as the signed-in user."}
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "tracker_project_list",
        "arguments": json.dumps({"search": "Home"}),
    }
    assert body["messages"][3]["role"] == "tool"
    assert body["messages"][3]["tool_call_id"] == "call_1"
    assert json.loads(body["messages"][3]["content"])["rows"][0]["name"] == "Home"
    create = body["tools"][1]["function"]
    assert create["name"] == "tracker_task_create"
    assert create["parameters"]["required"] == ["project", "title"]
    assert create["parameters"]["properties"]["due_date"]["format"] == "date"
    assert "stream" not in body  # nobody listens for deltas: a plain request


def test_plain_answer_with_tool_calls_and_usage(server: FakeOpenAIServer) -> None:
    server.queue(
        openai_completion(
            "Creating it.",
            [("call_2", "tracker_task_create", {"project": 7, "title": "Buy milk"})],
            usage=(120, 30),
        )
    )
    response = get_model("local:fake-gpt").call_tools(CONVERSATION, [TASK_CREATE])

    assert response.text == "Creating it."
    assert response.tool_calls == (ToolCall("call_2", "tracker_task_create", {"project": 7, "title": "Buy milk"}),)
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (120, 30)
    assert response.model == "fake-gpt"
    assert response.provider == "local:fake-gpt"


def test_streamed_text_and_tool_call_arguments_and_usage(server: FakeOpenAIServer) -> None:
    server.queue(
        openai_stream(
            ["I'll ", "create ", "it."],
            [("call_9", "tracker_task_create", {"project": 7, "title": "Buy milk"})],
            usage=(200, 12),
        )
    )
    deltas: list[str] = []
    response = get_model("local:fake-gpt").call_tools(CONVERSATION, [TASK_CREATE], on_text_delta=deltas.append)

    assert deltas == ["I'll ", "create ", "it."]
    assert response.text == "I'll create it."
    # The arguments arrived in three fragments and were joined before parsing.
    assert response.tool_calls == (ToolCall("call_9", "tracker_task_create", {"project": 7, "title": "Buy milk"}),)
    assert response.usage.total_tokens == 212
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_complete_sends_no_tools(server: FakeOpenAIServer) -> None:
    server.queue(openai_completion("A short summary."))
    response = get_model("local:fake-gpt").complete([Message.user("Summarise: we bought milk.")])
    assert response.text == "A short summary."
    assert "tools" not in server.requests[0].body


def test_arguments_that_are_not_json_are_surfaced_not_guessed(server: FakeOpenAIServer) -> None:
    reply = openai_completion("", [("call_3", "tracker_task_create", {})])
    reply.json["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"title": "Buy'
    server.queue(reply)
    (call,) = get_model("local:fake-gpt").call_tools(CONVERSATION, [TASK_CREATE]).tool_calls
    assert call.arguments == {}
    assert call.invalid_arguments == '{"title": "Buy'


def test_output_limit_and_timeout_come_from_settings(server: FakeOpenAIServer) -> None:
    with override_settings(
        ASSISTANT={
            **provider_settings(local={"kind": "openai", "base_url": server.base_url, "api_key": "k"}),
            "MAX_OUTPUT_TOKENS": 77,
        }
    ):
        get_model("local:fake-gpt").call_tools([Message.user("hi")], [])
    assert server.requests[0].body["max_tokens"] == 77


def test_rejected_key_is_a_readable_error_after_one_request(server: FakeOpenAIServer) -> None:
    server.queue(error_reply(401, "Incorrect API key provided"))
    with pytest.raises(ModelError) as caught:
        get_model("local:fake-gpt").call_tools([Message.user("hi")], [])
    assert "rejected the credentials" in str(caught.value)
    assert "OPENAI_API_KEY" in str(caught.value)
    assert len(server.requests) == 1


def test_missing_key_for_the_public_api_fails_without_a_request() -> None:
    with (
        override_settings(ASSISTANT=provider_settings(openai={"api_key": None, "base_url": None})),
        pytest.raises(ModelError, match="no API key is configured. Set OPENAI_API_KEY"),
    ):
        get_model("openai:gpt-4o-mini").call_tools([Message.user("hi")], [])


def test_unknown_provider_name_is_a_configuration_error() -> None:
    with override_settings(ASSISTANT=provider_settings()), pytest.raises(ModelError, match="Unknown model provider"):
        get_model("ollama:llama3")


def test_streamed_calls_that_share_an_index_but_not_an_id_stay_two_calls(server: FakeOpenAIServer) -> None:
    # Some compatible servers send every tool call whole, each at index 0, each with its own id.
    def chunk(delta: dict[str, object], finish: str | None = None) -> tuple[None, dict[str, object]]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return None, {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake-gpt",
                      "choices": [choice]}

    events: list[tuple[str | None, object]] = [chunk({"role": "assistant", "content": ""})]
    for call_id, search in (("call_a", "milk"), ("call_b", "bread")):
        function = {"name": "tracker_task_list", "arguments": json.dumps({"search": search})}
        events.append(chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": function}]}))
    events += [chunk({}, "tool_calls"), (None, "[DONE]")]
    server.queue(Reply(sse=events))

    response = get_model("local:fake-gpt").call_tools(CONVERSATION, [TASK_LIST], on_text_delta=lambda delta: None)
    assert response.tool_calls == (
        ToolCall("call_a", "tracker_task_list", {"search": "milk"}),
        ToolCall("call_b", "tracker_task_list", {"search": "bread"}),
    )
