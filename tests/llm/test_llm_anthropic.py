"""The anthropic adapter against a fake Messages API server on loopback: real SDK, real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.test import override_settings

from assistant.llm import Message, ModelError, ToolCall, get_model
from assistant.testing.providers import (
    FakeAnthropicServer,
    anthropic_message,
    anthropic_stream,
    error_reply,
    provider_settings,
)
from tests.tracker_tools import TASK_COMPLETE, TASK_LIST

CONVERSATION = [
    Message.system("You act as the signed-in user."),
    Message.user("mark 'Buy milk' done"),
    Message.assistant(
        "Looking it up.",
        [
            ToolCall("toolu_1", "tracker_task_list", {"search": "Buy milk"}),
            ToolCall("toolu_2", "tracker_task_list", {"search": "milk"}),
        ],
    ),
    Message.tool("toolu_1", json.dumps({"rows": [{"id": 3, "title": "Buy milk"}]})),
    Message.tool("toolu_2", json.dumps({"rows": []})),
]


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with (
        FakeAnthropicServer() as fake,
        override_settings(
            ASSISTANT=provider_settings(
                claude={"kind": "anthropic", "base_url": fake.base_url, "api_key": "sk-ant-test"},
            )
        ),
    ):
        yield fake


def test_request_maps_system_tools_and_tool_results(server: FakeAnthropicServer) -> None:
    server.queue(anthropic_message("Done."))
    get_model("claude:fake-claude").call_tools(CONVERSATION, [TASK_LIST, TASK_COMPLETE])

    body = server.requests[0].body
    assert body["system"] == "You act as the signed-in user."
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"]
    assistant_turn = body["messages"][1]["content"]
    assert assistant_turn[0] == {"type": "text", "text": "Looking it up."}
    assert assistant_turn[1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "tracker_task_list",
        "input": {"search": "Buy milk"},
    }
    # Both results of one assistant turn travel together in the next user turn.
    results = body["messages"][2]["content"]
    assert [block["tool_use_id"] for block in results] == ["toolu_1", "toolu_2"]
    assert json.loads(results[0]["content"])["rows"][0]["id"] == 3
    assert body["tools"][1] == {
        "name": "tracker_task_complete",
        "description": "Mark a task as done.",
        "input_schema": TASK_COMPLETE.parameters,
    }
    assert body["max_tokens"] == 1024


def test_plain_answer_with_tool_use_and_usage(server: FakeAnthropicServer) -> None:
    server.queue(anthropic_message("On it.", [("toolu_5", "tracker_task_complete", {"task_id": 3})], usage=(90, 14)))
    response = get_model("claude:fake-claude").call_tools(CONVERSATION, [TASK_COMPLETE])
    assert response.text == "On it."
    assert response.tool_calls == (ToolCall("toolu_5", "tracker_task_complete", {"task_id": 3}),)
    assert response.usage.to_dict() == {"prompt_tokens": 90, "completion_tokens": 14}
    assert response.model == "fake-claude"


def test_streamed_text_tool_use_and_usage(server: FakeAnthropicServer) -> None:
    server.queue(
        anthropic_stream(
            ["Marking ", "it done."], [("toolu_6", "tracker_task_complete", {"task_id": 3})], usage=(300, 21)
        )
    )
    deltas: list[str] = []
    response = get_model("claude:fake-claude").call_tools(
        CONVERSATION,
        [TASK_COMPLETE],
        on_text_delta=deltas.append,
    )
    assert deltas == ["Marking ", "it done."]
    assert response.text == "Marking it done."
    assert response.tool_calls == (ToolCall("toolu_6", "tracker_task_complete", {"task_id": 3}),)
    assert response.usage.to_dict() == {"prompt_tokens": 300, "completion_tokens": 21}
    assert server.requests[0].body["stream"] is True


def test_payment_required_is_permanent_and_readable(server: FakeAnthropicServer) -> None:
    server.queue(error_reply(402, "Your credit balance is too low"))
    with pytest.raises(ModelError) as caught:
        get_model("claude:fake-claude").call_tools([Message.user("hi")], [])
    assert "needs payment or credit" in str(caught.value)
    assert "credit balance is too low" in str(caught.value)
    assert len(server.requests) == 1


def test_missing_key_fails_without_a_request(server: FakeAnthropicServer) -> None:
    with (
        override_settings(ASSISTANT=provider_settings(anthropic={"base_url": server.base_url})),
        pytest.raises(ModelError, match="Set ANTHROPIC_API_KEY"),
    ):
        get_model("anthropic:claude-x").call_tools([Message.user("hi")], [])
    assert server.requests == []
