"""The offline demo model on the four demo requests, against tool specs shaped like the tracker's.

A tiny in-memory stand-in answers the tool calls here; the end-to-end test against the real
tracker tools and database lives with the run loop.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from assistant.llm import Message, ModelResponse, Tool, ToolCall, get_model
from tests.tracker_tools import TRACKER_TOOLS


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


def converse(
    text: str, board: Board, *, stop_before: frozenset[str] | set[str] = frozenset()
) -> tuple[list[ToolCall], ModelResponse]:
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


def test_a_question_about_done_tasks_is_a_read() -> None:
    """"done" is also a verb for completing; in a question it is the status value the read filters on."""
    calls, reply = converse("which tasks are done?", Board())
    assert [(c.name, c.arguments) for c in calls] == [("tracker_task_list", {"status": "done"})]
    assert "Write report" in reply.text
    assert "Water plants" not in reply.text


def test_create_looks_up_the_project_then_creates_the_task() -> None:
    board = Board()
    calls, reply = converse("create a task 'Buy milk' in Home", board)
    assert [(c.name, c.arguments) for c in calls] == [
        ("tracker_project_list", {"search": "Home"}),
        ("tracker_task_create", {"title": "Buy milk", "project": 7}),
    ]
    assert {"title": "Buy milk", "project": "Home"}.items() <= board.tasks[-1].items()
    # The app's own message is the confirmation.
    assert reply.text == "Done: Task created."


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


DEAL_TOOLS = [
    Tool(
        "crm_deal_list",
        'List your deals. Active deals are those whose stage is "lead" or "proposal" (filter with stage__in); '
        'stalled deals have stage "proposal". Find a deal by name with search.',
        {
            "type": "object",
            "additionalProperties": False,
            "required": [],
            "properties": {
                "stage": {"type": "string", "enum": ["lead", "proposal", "won"], "description": "Stage."},
                "stage__in": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["lead", "proposal", "won"]},
                    "description": "Any of these stages.",
                },
                "size": {"type": "integer", "enum": [1, 2, 3], "description": "Size."},
                "search": {"type": "string", "description": "Text in the name."},
            },
        },
    ),
    Tool(
        "crm_deal_update",
        "Change a deal's stage or size.",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["deal_id"],
            "properties": {
                "deal_id": {"type": "integer", "description": "The deal."},
                "stage": {
                    "type": "string",
                    "enum": ["lead", "proposal", "won"],
                    "description": "Stage. One of: lead = New lead, proposal = Proposal sent, won = Won.",
                },
                "size": {"type": "integer", "enum": [1, 2, 3], "description": "Size: 1 = Small, 2 = Medium, 3 = Big."},
            },
        },
    ),
    Tool(
        "crm_note_add",
        "Add a note to a deal.",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["deal", "body"],
            "properties": {
                "deal": {"type": ["integer", "string"], "description": "The deal: its id, or its exact name."},
                "body": {"type": "string", "description": "Note text."},
            },
        },
    ),
]


def _first_call(text: str, tools: list[Tool]) -> tuple[str, dict[str, Any]]:
    [call] = get_model("offline").call_tools([Message.user(text)], tools).tool_calls
    return call.name, call.arguments


def test_words_a_description_defines_become_filters() -> None:
    """"Active" is no stage; the description says which stages it means, and which argument takes them."""
    assert _first_call("show my active deals", DEAL_TOOLS) == ("crm_deal_list", {"stage__in": ["lead", "proposal"]})
    assert _first_call("which deals are stalled?", DEAL_TOOLS) == ("crm_deal_list", {"stage": "proposal"})
    # A value the schema lists, or a label another tool gives one, is used as it is.
    assert _first_call("list the won deals", DEAL_TOOLS) == ("crm_deal_list", {"stage": "won"})
    assert _first_call("list the big deals", DEAL_TOOLS) == ("crm_deal_list", {"size": 3})


def test_rows_are_described_by_field_names_and_value_labels() -> None:
    model = get_model("offline")
    call = ToolCall("c1", "crm_deal_list", {"stage__in": ["lead", "proposal"]})
    rows = [
        {"id": 1, "name": "Acme", "stage": "lead", "size": 3, "owner": 4, "owner__username": "ada", "vip": True},
        {"id": 2, "name": "Globex", "stage": "proposal", "size": 1, "owner": None, "vip": False},
    ]
    messages = [
        Message.user("show my active deals"),
        Message.assistant("", [call]),
        Message.tool("c1", json.dumps({"status": "data", "data": {"results": rows, "truncated": True}})),
    ]
    reply = model.call_tools(messages, DEAL_TOOLS).text
    assert reply.splitlines()[:3] == [
        "Found 2 active deals:",
        "- Acme — stage: new lead, size: big, owner: ada, vip",
        "- Globex — stage: proposal sent, size: small",
    ]
    assert "There are more" in reply


def test_a_reference_that_takes_a_name_is_filled_without_a_lookup() -> None:
    assert _first_call("add a note 'Call on Monday' to Acme", DEAL_TOOLS) == (
        "crm_note_add", {"deal": "Acme", "body": "Call on Monday"},
    )


def _reply_to(text: str, call: ToolCall, result: dict[str, Any]) -> str:
    messages = [Message.user(text), Message.assistant("", [call]), Message.tool(call.id, json.dumps(result))]
    return get_model("offline").call_tools(messages, DEAL_TOOLS).text


def test_what_the_loop_tells_the_model_is_not_repeated_to_the_person() -> None:
    call = ToolCall("c1", "crm_note_add", {"deal": "Acme", "body": "Hi"})
    declined = {
        "status": "declined", "took_effect": False,
        "reason": "The user declined this action. Do not try it again; ask what they want instead.",
    }
    assert _reply_to("add a note 'Hi' to Acme", call, declined) == "You declined, so nothing was changed."


def test_an_unknown_outcome_is_not_reported_as_done() -> None:
    call = ToolCall("c1", "crm_note_add", {"deal": "Acme", "body": "Hi"})
    unknown = {"status": "unknown", "took_effect": None, "reason": "The worker stopped before it finished."}
    reply = _reply_to("add a note 'Hi' to Acme", call, unknown)
    assert not reply.startswith("Done")
    assert "can't tell whether that took effect" in reply


def test_the_apps_message_confirms_a_write() -> None:
    call = ToolCall("c1", "crm_note_add", {"deal": "Acme", "body": "Hi"})
    done = {"status": "done", "took_effect": True, "data": {"redirect": "/deals/1/",
                                                           "messages": [{"level": "success", "text": "Note added."}]}}
    assert _reply_to("add a note 'Hi' to Acme", call, done) == "Done: Note added."


def test_whose_id_an_argument_holds_comes_from_its_description() -> None:
    """`pk` of a comment tool is the deal's id ("Id of the deal to comment on"); `id__gte` is a filter, no id."""
    tools = [
        Tool(
            "crm_deal_list",
            "List your deals; find one by name with search.",
            {
                "type": "object",
                "additionalProperties": False,
                "required": [],
                "properties": {
                    "id__gte": {"type": "integer", "description": "Only rows whose id is at least this."},
                    "search": {"type": "string", "description": "Text in the name."},
                    "ordering": {"type": "string", "enum": ["name", "-name"], "description": "Sort order."},
                },
            },
        ),
        Tool(
            "crm_comment_create",
            "Comment on a deal.",
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["pk", "body"],
                "properties": {
                    "pk": {"type": "integer", "description": "Id of the deal to comment on."},
                    "body": {"type": "string", "description": "Comment."},
                },
            },
        ),
    ]
    model = get_model("offline")
    messages = [Message.user("add a comment 'Call back' to 'Acme'")]
    first = model.call_tools(messages, tools)
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("crm_deal_list", {"search": "Acme"})]
    messages += [
        first.to_message(),
        Message.tool(first.tool_calls[0].id, json.dumps({"results": [{"id": 9, "name": "Acme"}]})),
    ]
    second = model.call_tools(messages, tools)
    assert [(c.name, c.arguments) for c in second.tool_calls] == [
        ("crm_comment_create", {"pk": 9, "body": "Call back"}),
    ]
    # Naming a field the list can be sorted by is not asking for that order.
    assert _first_call("list deals by name", tools) == ("crm_deal_list", {})


def _member(name: str, role: str) -> Tool:
    """A delegation tool as a society offers one (`ask_<member>`, its role in the description)."""
    return Tool(f"ask_{name}", f"Hand a task to the member “{name}”: {role.rstrip('.')}. It works with its own "
                "tools and answers with what it did. Its record: new.",
                {"type": "object", "properties": {"task": {"type": "string"}, "context": {"type": "string"}},
                 "required": ["task"], "additionalProperties": False})


def test_a_record_with_records_of_another_kind_in_it_is_split_for_any_app() -> None:
    """"a album P with the photos 'a' and 'b'": the kinds come from the members' roles, not from one app."""
    members = [_member("curator", "Creates and renames albums."), _member("archivist", "Adds and removes photos.")]
    model = get_model("offline")
    messages = [Message.user("create an album Summer with the photos 'Lake' and 'Beach'")]
    first = model.call_tools(messages, members)
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("ask_curator", {"task": "Create the album 'Summer'."})]
    messages += [first.to_message(), Message.tool(first.tool_calls[0].id, json.dumps(
        {"status": "answered", "answer": "Done: album Summer created."}))]
    second = model.call_tools(messages, members)
    assert [(c.name, c.arguments) for c in second.tool_calls] == [
        ("ask_archivist", {"task": "Add the photo 'Lake' to the album 'Summer'."}),
        ("ask_archivist", {"task": "Add the photo 'Beach' to the album 'Summer'."}),
    ]
    # A field is no kind of record: "with the colour 'red'" stays one task.
    one = model.call_tools([Message.user("create an album Summer with the colour 'red'")], members)
    assert [c.name for c in one.tool_calls] == ["ask_curator"]
    assert one.tool_calls[0].arguments["task"] == "Create an album Summer with the colour 'red'."


# A spec that only asks members, and greetings: what is about the assistant itself needs no member and no tool.

DEMO_MEMBERS = [
    _member("reader", "Finds and lists projects, tasks and comments (reads only)."),
    _member("clerk", "Adds, updates, completes and deletes tasks."),
    _member("keeper", "Creates, renames, archives and deletes projects (a delete only with your approval)."),
]
MEMBER_LINE = re.compile(r"^- \*\*(?P<member>[\w-]+)\*\* — (?P<role>.+?)(?: — e\.g\. “(?P<example>[^”]+)”)?$",
                         re.MULTILINE)


def _roster(members: list[Tool]) -> dict[str, tuple[str, str | None]]:
    """What a spec with only `members` says it can do: each member's role and example, by name."""
    response = get_model("offline").call_tools([Message.user("what can you do?")], members)
    assert response.tool_calls == ()
    return {found["member"]: (found["role"], found["example"]) for found in MEMBER_LINE.finditer(response.text)}


def _asked(text: str, members: list[Tool]) -> list[str]:
    return [call.name for call in get_model("offline").call_tools([Message.user(text)], members).tool_calls]


def test_a_spec_that_only_asks_members_says_itself_what_each_one_does() -> None:
    response = get_model("offline").call_tools([Message.user("What can you do?")], DEMO_MEMBERS)

    assert response.tool_calls == ()  # no member asked: their roles say it
    assert response.text.startswith("Here is what I can do for you:")
    assert response.text.endswith("Put your own values where an example has <angle brackets>.")
    assert _roster(DEMO_MEMBERS) == {
        "reader": ("finds and lists projects, tasks and comments (reads only)", "list my projects"),
        "clerk": ("adds, updates, completes and deletes tasks", "add a task '<name>'"),
        "keeper": ("creates, renames, archives and deletes projects (a delete only with your approval)",
                   "create a project '<name>'"),
    }


def test_each_example_sent_back_goes_to_the_member_it_is_shown_for_in_any_app() -> None:
    albums = [_member("curator", "Creates and renames albums."), _member("archivist", "Adds and removes photos.")]
    for members in (DEMO_MEMBERS, albums):
        for name, (_, example) in _roster(members).items():
            assert example is not None, name
            filled = re.sub(r"<[^<>]+>", "Garden", example)
            assert _asked(example, members) == _asked(filled, members) == [f"ask_{name}"], example
    assert _roster(albums)["curator"][1] == "create an album '<name>'"


def test_an_example_that_would_reach_another_member_is_not_shown() -> None:
    # "list my photos" fits both as well, and the first one offered gets it: it is no example for the editor.
    members = [_member("viewer", "Lists albums and photos."), _member("editor", "Lists photos."),
               _member("host", "Knows the house rules.")]
    roster = _roster(members)
    assert roster["viewer"] == ("lists albums and photos", "list my albums")
    assert roster["editor"] == ("lists photos", None)
    assert roster["host"] == ("knows the house rules", None)  # no action and no record named: no example
    assert _asked("list my photos", members) == ["ask_viewer"]


GREETINGS = [("hello", "Hello!"), ("Hi!", "Hello!"), ("hey there", "Hello!"), ("Good morning", "Good morning!"),
             ("thanks", "You're welcome!"), ("Thank you!", "You're welcome!"), ("ok, thanks a lot", "You're welcome!")]


@pytest.mark.parametrize(("greeting", "opening"), GREETINGS)
def test_a_greeting_gets_a_short_friendly_reply_from_whoever_is_asked(greeting: str, opening: str) -> None:
    for tools in (TRACKER_TOOLS, DEMO_MEMBERS):
        response = get_model("offline").call_tools([Message.user(greeting)], tools)
        assert response.tool_calls == ()
        assert response.text.startswith(opening) and "“what can you do?”" in response.text
        assert "can't" not in response.text and "**" not in response.text  # no refusal, no list
    society = get_model("offline").call_tools([Message.user(greeting)], DEMO_MEMBERS).text
    assert "(reader, clerk or keeper)" in society


def test_a_greeting_does_not_swallow_the_request_it_starts() -> None:
    assert _asked("hi, list my tasks", DEMO_MEMBERS) == ["ask_reader"]
    assert _asked("good morning, create a project 'Garden'", DEMO_MEMBERS) == ["ask_keeper"]
    assert _first_call("hello, list my open tasks", TRACKER_TOOLS) == ("tracker_task_list", {"status": "open"})
    # A greeting before a question about the assistant: that question, answered.
    said = get_model("offline").call_tools([Message.user("hey there, what can you do?")], DEMO_MEMBERS)
    assert said.tool_calls == () and said.text.startswith("Here is what I can do for you:")


def test_a_greeting_right_after_a_question_is_no_answer_to_it() -> None:
    _, asked = converse("create a task in Home", Board())
    assert asked.text.startswith("What title"), asked.text
    messages = [Message.user("create a task in Home"), asked.to_message(), Message.user("hello")]
    response = get_model("offline").call_tools(messages, TRACKER_TOOLS)
    assert response.tool_calls == () and response.text.startswith("Hello!")
