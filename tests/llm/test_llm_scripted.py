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


def test_one_file_scripts_each_spec_of_a_society_and_any_other_with_a_star(tmp_path: Path) -> None:
    path = write_script(tmp_path, {
        "orchestrator": [{"tool_calls": [{"name": "ask_clerk", "arguments": {"task": "Add 'milk'."}}]},
                         {"text": "The clerk added it."}],
        "clerk": [{"text": "Added."}],
        "*": [{"text": "Anyone else."}],
    })
    orchestrator, clerk, reader = (get_model(f"scripted:{path}") for _ in range(3))
    orchestrator.seek(0, spec="orchestrator")  # what the run loop does when it starts a run under a spec
    clerk.seek(0, spec="clerk")
    reader.seek(0, spec="reader")
    assert orchestrator.call_tools([Message.user("add milk")], []).tool_calls[0].name == "ask_clerk"
    assert clerk.call_tools([Message.user("Add 'milk'.")], []).text == "Added."
    assert reader.call_tools([Message.user("hi")], []).text == "Anyone else."
    # A run taken up again continues its own spec's script where it stopped.
    orchestrator.seek(1, spec="orchestrator")
    assert orchestrator.call_tools([Message.user("...")], []).text == "The clerk added it."


@pytest.mark.parametrize("entries", [{"clerk": {"text": "not a list"}}, {"clerk": [{"say": "hi"}]}])
def test_a_badly_shaped_script_of_specs_is_refused_saying_where(tmp_path: Path, entries: object) -> None:
    path = write_script(tmp_path, entries)
    with pytest.raises(ModelError, match=r"script\.json"):
        get_model(f"scripted:{path}")
