"""The scripted model: replays its script in order, per instance, and fails clearly at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import override_settings

from assistant.llm import Message, ModelError, ScriptExhaustedError, ToolCall, get_model


def write_script(tmp_path: Path, entries: object) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(entries))
    return path


def test_replays_entries_in_order_and_then_fails_clearly(tmp_path: Path) -> None:
    path = write_script(
        tmp_path,
        [
            {"tool_calls": [{"name": "tracker_task_list", "arguments": {"status": "open"}}]},
            {"text": "You have one open task."},
        ],
    )
    model = get_model(f"scripted:{path}")
    first = model.call_tools([Message.user("what are my open tasks?")], [])
    assert first.tool_calls == (ToolCall("call_1_1", "tracker_task_list", {"status": "open"}),)
    assert first.text == ""
    deltas: list[str] = []
    second = model.call_tools([Message.user("...")], [], on_text_delta=deltas.append)
    assert second.text == "You have one open task."
    assert deltas == ["You have one open task."]
    with pytest.raises(ScriptExhaustedError, match=r"ran out of responses: .*script.json has 2 and this was call 3"):
        model.call_tools([Message.user("again")], [])


def test_each_instance_starts_at_the_top(tmp_path: Path) -> None:
    path = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    with override_settings(ASSISTANT={"MODEL": f"scripted:{path}"}):
        assert get_model().complete([Message.user("x")]).text == "one"
        assert get_model().complete([Message.user("x")]).text == "one"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json", "is not valid JSON"),
        (json.dumps({"text": "hi"}), "must be a JSON list"),
        (json.dumps([{"txt": "hi"}]), "entry 1: each entry must be an object"),
        (json.dumps([{"text": "ok"}, {"tool_calls": [{"arguments": {}}]}]), "entry 2: tool call 1 must be"),
        (json.dumps([{"tool_calls": [{"name": "x", "arguments": [1]}]}]), "arguments of tool call 1 must be an object"),
    ],
)
def test_a_broken_script_is_refused_with_the_place_of_the_problem(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ModelError, match=words):
        get_model(f"scripted:{path}")


def test_a_missing_script_is_a_readable_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="Cannot read the model script"):
        get_model(f"scripted:{tmp_path / 'absent.json'}")
