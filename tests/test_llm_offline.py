"""The offline demo model on the four demo requests, against tool specs shaped like the tracker's.

A tiny in-memory stand-in answers the tool calls here; the end-to-end test against the real
tracker tools and database lives with the run loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from assistant.llm import Message, ModelResponse, Tool, ToolCall, get_model
from tests.fakes.tools import TRACKER_TOOLS


@dataclass
class Board:
    """Answers tool calls the way an executor might, with `status` + `rows` / `message` / `errors`."""

    projects: list[dict[str, Any]] = field(
        default_factory=lambda: [{"id": 7, "name": "Home"}, {"id": 8, "name": "Work"}]
    )
    tasks: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {"id": 3, "title": "Water plants", "status": "open", "project": "Home"},
            {"id": 4, "title": "Write report", "status": "done", "project": "Work"},
        ]
    )
    confirm: set[str] = field(default_factory=lambda: {"tracker_project_delete"})

    def run(self, call: ToolCall) -> dict[str, Any]:
        args = call.arguments
        if call.name == "tracker_project_list":
            return {
                "status": "ok",
                "rows": [p for p in self.projects if args.get("search", "").lower() in p["name"].lower()],
            }
        if call.name == "tracker_task_list":
            rows = [t for t in self.tasks if args.get("search", "").lower() in t["title"].lower()]
            return {"status": "ok", "rows": [t for t in rows if t["status"] == args.get("status", t["status"])]}
        if call.name == "tracker_task_create":
            if not args.get("title"):
                return {"status": "invalid", "errors": {"title": ["This field is required."]}}
            project = next(p for p in self.projects if p["id"] == args["project"])
            self.tasks.append(
                {"id": 10 + len(self.tasks), "title": args["title"], "status": "open", "project": project["name"]}
            )
            return {"status": "done", "message": "Task created."}
        if call.name == "tracker_task_complete":
            task = next((t for t in self.tasks if t["id"] == args["task_id"]), None)
            if task is None:
                return {"status": "not_found"}
            task["status"] = "done"
            return {"status": "done", "message": "Task marked as done."}
        if call.name == "tracker_project_delete":
            self.projects = [p for p in self.projects if p["id"] != args["pk"]]
            return {"status": "done", "message": "Project deleted."}
        raise AssertionError(f"unexpected tool {call.name}")


def converse(text: str, board: Board, *, stop_before: set[str] = frozenset()) -> tuple[list[ToolCall], ModelResponse]:
    """Run the model like the loop does until it replies (or asks for a tool in `stop_before`)."""
    model = get_model("offline")
    messages = [Message.system("You act as the signed-in user."), Message.user(text)]
    calls: list[ToolCall] = []
    for _ in range(6):
        response = model.call_tools(messages, TRACKER_TOOLS)
        messages.append(response.to_message())
        if not response.tool_calls:
            return calls, response
        for call in response.tool_calls:
            calls.append(call)
            if call.name in stop_before:
                return calls, response
            messages.append(Message.tool(call.id, json.dumps(board.run(call))))
    raise AssertionError("the offline model did not finish within 6 calls")


def test_open_tasks_are_listed() -> None:
    calls, reply = converse("what are my open tasks?", Board())
    assert [(c.name, c.arguments) for c in calls] == [("tracker_task_list", {"status": "open"})]
    assert "Water plants" in reply.text
    assert "Write report" not in reply.text
    assert reply.model == "offline-demo"
    assert reply.is_demo


def test_create_looks_up_the_project_then_creates_the_task() -> None:
    board = Board()
    calls, reply = converse("create a task 'Buy milk' in Home", board)
    assert [(c.name, c.arguments) for c in calls] == [
        ("tracker_project_list", {"search": "Home"}),
        ("tracker_task_create", {"title": "Buy milk", "project": 7}),
    ]
    assert {"title": "Buy milk", "project": "Home"}.items() <= board.tasks[-1].items()
    assert reply.text.startswith("Done: create a task")
    assert "Task created." in reply.text


def test_mark_done_finds_the_task_by_its_quoted_title() -> None:
    board = Board()
    board.tasks.append({"id": 12, "title": "Buy milk", "status": "open", "project": "Home"})
    calls, reply = converse("mark 'Buy milk' done", board)
    assert [(c.name, c.arguments) for c in calls] == [
        ("tracker_task_list", {"search": "Buy milk"}),
        ("tracker_task_complete", {"task_id": 12}),
    ]
    assert board.tasks[-1]["status"] == "done"
    assert "Task marked as done." in reply.text


def test_delete_asks_for_the_project_then_the_delete_waits_for_confirmation() -> None:
    board = Board()
    calls, response = converse("delete the project Home", board, stop_before={"tracker_project_delete"})
    assert [(c.name, c.arguments) for c in calls] == [
        ("tracker_project_list", {"search": "Home"}),
        ("tracker_project_delete", {"pk": 7}),
    ]
    # The loop now waits for the person; after a denial the model says nothing changed.
    model = get_model("offline")
    messages = [
        Message.user("delete the project Home"),
        Message.assistant("", [calls[0]]),
        Message.tool(calls[0].id, json.dumps(board.run(calls[0]))),
        Message.assistant("", [calls[1]]),
        Message.tool(calls[1].id, json.dumps({"status": "declined", "message": "You declined."})),
    ]
    reply = model.call_tools(messages, TRACKER_TOOLS)
    assert reply.tool_calls == ()
    assert "nothing was changed" in reply.text
    assert [p["name"] for p in board.projects] == ["Home", "Work"]


def test_a_name_that_does_not_exist_is_reported_and_nothing_is_written() -> None:
    calls, reply = converse("delete the project Garden", Board())
    assert [c.name for c in calls] == ["tracker_project_list"]
    assert "couldn't find a project called “Garden”" in reply.text


def test_validation_errors_are_passed_on() -> None:
    model = get_model("offline")
    call = ToolCall("c1", "tracker_task_create", {"title": "Buy milk", "project": 7})
    messages = [
        Message.user("create a task 'Buy milk' in project 7"),
        Message.assistant("", [call]),
        Message.tool("c1", json.dumps({"status": "invalid", "errors": {"due_date": ["Enter a valid date."]}})),
    ]
    reply = model.call_tools(messages, TRACKER_TOOLS)
    assert "did not accept" in reply.text
    assert "due_date: Enter a valid date." in reply.text


def test_an_unmappable_request_lists_what_it_can_do() -> None:
    calls, reply = converse("sing me a song", Board())
    assert calls == []
    assert "offline demo model" in reply.text
    for tool in TRACKER_TOOLS:
        assert tool.name in reply.text


def test_it_works_from_schemas_not_from_knowledge_of_one_app() -> None:
    """A developer's own tools, with other names and fields, get the same treatment."""
    tools = [
        Tool(
            "crm_contact_search",
            "Search your contacts.",
            {
                "type": "object",
                "additionalProperties": False,
                "required": [],
                "properties": {"q": {"type": "string", "description": "Search text."}},
            },
        ),
        Tool(
            "crm_note_add",
            "Add a note to a contact.",
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["contact_id", "body"],
                "properties": {
                    "contact_id": {"type": "integer", "description": "The contact."},
                    "body": {"type": "string", "description": "Note text."},
                },
            },
        ),
    ]
    model = get_model("offline")
    messages = [Message.user("add a note 'Call back on Monday' to the contact Ada")]
    first = model.call_tools(messages, tools)
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("crm_contact_search", {"q": "Ada"})]
    messages += [
        first.to_message(),
        Message.tool(first.tool_calls[0].id, json.dumps({"results": [{"id": 5, "name": "Ada"}]})),
    ]
    second = model.call_tools(messages, tools)
    assert [(c.name, c.arguments) for c in second.tool_calls] == [
        ("crm_note_add", {"contact_id": 5, "body": "Call back on Monday"}),
    ]


def test_text_streams_and_complete_summarises() -> None:
    deltas: list[str] = []
    reply = get_model("offline").call_tools([Message.user("hello")], TRACKER_TOOLS, on_text_delta=deltas.append)
    assert "".join(deltas) == reply.text
    assert len(deltas) > 5
    summary = get_model("offline").complete([Message.user("create a task 'Buy milk'"), Message.assistant("Done.")])
    assert "create a task 'Buy milk'" in summary.text
    assert summary.model == "offline-demo"
