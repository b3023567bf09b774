"""The translator of the AG-UI endpoint alone (assistant/agui/translate/): rows and deltas in, the protocol's
events out, in the orders a stream meets them. No database, no worker: the endpoint's tests through daphne
(tests/agui/test_agui_endpoint.py) hold the whole; these hold the orderings a live run produces only by chance,
such as a read of the rows that overtakes the deltas of the text it records."""

from __future__ import annotations

from typing import Any

from ag_ui.core import EventType

from assistant.agui.translate import SnapshotHere, Translator

TOP = 1


def step(seq: int, kind: str = "tool_call", *, run: int = TOP, state: str = "finished", tool: str = "",
         text: str | None = None, result: Any = None, confirmation: str = "", summary: str = "") -> dict[str, Any]:
    if kind == "model_call":
        result = {"text": text or "", "tool_calls": []}
    elif result is None and state == "finished":
        result = {"status": "done", "took_effect": True}
    return {"id": run * 100 + seq, "run_id": run, "seq": seq, "kind": kind, "state": state, "tool_name": tool,
            "call_id": f"c{seq}", "arguments": {"n": seq}, "result": result, "took_effect": None, "reason": "",
            "confirmation": confirmation, "summary": summary or None, "created_at": f"2026-01-01T00:00:{seq:02d}"}


def run(run_id: int = TOP, status: str = "running", steps: list[dict[str, Any]] | None = None, **fields: Any
        ) -> dict[str, Any]:
    return {"id": run_id, "status": status, "stop_reason": "", "error": "", "reply": "", "member": None,
            "parent_run_id": None, "asked_in": None, "task": None, "steps": steps or [], **fields}


def state(*runs: dict[str, Any], reply: str | None = None) -> dict[str, Any]:
    return {"runs": list(runs), "reply": {"id": 9, "content": reply} if reply is not None else None, "tools": {},
            "event_seq": None}


def kinds(events: list[Any]) -> list[str]:
    return ["SNAPSHOT" if isinstance(event, SnapshotHere) else event.type.value for event in events]


def test_deltas_that_arrive_after_the_rows_recorded_their_text_are_not_said_again() -> None:
    """The rows were read (for the tool step before) and already held the model call and the next tool step;
    the model call's deltas arrive after: said once, from the rows."""
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    rows = [step(1, tool="a"), step(2, "model_call", text="One last thing."), step(3, tool="b", state="started")]

    said = translator.rows(state(run(steps=rows)))
    late = translator.token(TOP, "One last ", {}) + translator.token(TOP, "thing.", {})

    assert late == []
    texts = [event.delta for event in said if event.type == EventType.TEXT_MESSAGE_CONTENT]
    assert texts == ["One last thing."]
    # The next model call's deltas are said as the next call's text.
    translator.rows(state(run(steps=[*rows[:2], step(3, tool="b")])))
    [start, content] = translator.token(TOP, "Done.", {})
    assert (start.type, start.message_id, content.delta) == (EventType.TEXT_MESSAGE_START, "msg-1-4", "Done.")


def test_the_rest_of_a_text_streamed_in_part_is_said_from_the_rows_and_its_late_deltas_dropped() -> None:
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    opened = translator.token(TOP, "Hello ", {})
    rows = translator.rows(state(run(steps=[step(1, "model_call", text="Hello world.")])))

    assert kinds(opened) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert kinds(rows) == ["TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"] and rows[0].delta == "world."
    assert translator.token(TOP, "world.", {}) == []
    assert not translator.owe_snapshot


def test_a_text_the_client_holds_otherwise_than_recorded_is_corrected_by_a_snapshot_before_the_end() -> None:
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    translator.token(TOP, "…world.", {})  # attached mid-message: only the end was seen

    events = translator.rows(state(run(status="succeeded", steps=[step(1, "model_call", text="Hello world.")]),
                                   reply="Hello world."))

    assert kinds(events) == ["TEXT_MESSAGE_END", "SNAPSHOT", "RUN_FINISHED"]
    assert translator.finished


def test_rows_read_again_say_nothing_twice() -> None:
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    started = state(run(steps=[step(1, "model_call"), step(2, tool="list", state="started")]))
    finished = state(run(steps=[step(1, "model_call"), step(2, tool="list")]))

    first = translator.rows(started)
    again = translator.rows(started)
    result = translator.rows(finished)

    assert kinds(first) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_STARTED"]
    assert first[0].parent_message_id == "msg-1-1" and first[1].delta == '{"n": 2}'
    assert again == []
    assert kinds(result) == ["TOOL_CALL_RESULT", "STEP_FINISHED"]
    assert translator.rows(finished) == []


def test_an_approval_ends_the_run_only_once_nothing_of_its_tree_works() -> None:
    """Two members asked at once: one waits for the person, the other still works. The run is not interrupted
    until the other is done; then the waiting member is suspended, naming its interrupt."""
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    asks = [step(1, "model_call"), step(2, tool="ask_clerk", state="started", result={"status": "asked",
                                                                                      "member": "clerk",
                                                                                      "child_run_id": 2}),
            step(3, tool="ask_reader", state="started", result={"status": "asked", "member": "reader",
                                                                "child_run_id": 3})]
    waiting = run(2, "awaiting_confirmation", [step(1, run=2, tool="delete", state="awaiting_confirmation",
                                                    summary="Delete the task “Old”")],
                  member="clerk", parent_run_id=TOP, asked_in=102)

    working = translator.rows(state(run(status="awaiting_members", steps=asks), waiting,
                                    run(3, "running", member="reader", parent_run_id=TOP, asked_in=103)))
    paused = translator.rows(state(run(status="awaiting_members", steps=asks), waiting,
                                   run(3, "succeeded", reply="Two tasks.", member="reader", parent_run_id=TOP,
                                       asked_in=103)))

    assert EventType.RUN_FINISHED.value not in kinds(working)
    started = [event for event in working if event.type == EventType.SUBAGENT_STARTED]
    assert [(event.subagent_run_id, event.name, event.parent_tool_call_id) for event in started] == [
        ("run-2", "clerk", "call-1-2"), ("run-3", "reader", "call-1-3")]
    assert kinds(paused)[-1] == "RUN_FINISHED"
    [reader_done] = [event for event in paused if event.type == EventType.SUBAGENT_FINISHED
                     and event.subagent_run_id == "run-3"]
    assert reader_done.outcome.type == "success" and reader_done.result == "Two tasks."
    [suspended] = [event for event in paused if event.type == EventType.SUBAGENT_FINISHED
                   and event.subagent_run_id == "run-2"]
    assert suspended.outcome.type == "suspended" and suspended.outcome.interrupt_ids == ["approval-201"]
    [interrupt] = paused[-1].outcome.interrupts
    assert (interrupt.id, interrupt.subagent_run_id, interrupt.tool_call_id, interrupt.message) == (
        "approval-201", "run-2", "call-2-1", "Delete the task “Old”")


def test_a_members_steps_come_between_its_asking_call_and_that_calls_result() -> None:
    """Read after the whole tree finished (a re-read after a gap): the member is said where it was asked."""
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    tree = state(run(status="succeeded", steps=[
        step(1, "model_call"), step(2, tool="ask_clerk", result={"status": "answered", "member": "clerk",
                                                                 "child_run_id": 2, "answer": "Done it."}),
        step(3, "model_call", text="The clerk did it.")]),
        run(2, "succeeded", [step(1, "model_call", run=2, text="Done it.")], reply="Done it.", member="clerk",
            parent_run_id=TOP, asked_in=102, task="Do it."), reply="The clerk did it.")

    events = translator.rows(tree)

    assert kinds(events) == [
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "SUBAGENT_STARTED",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "SUBAGENT_FINISHED",
        "STEP_STARTED", "TOOL_CALL_RESULT", "STEP_FINISHED",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert events[4].subagent_run_id == "run-2" and events[3].description == "Do it."
    assert events[-1].result == {"reply": "The clerk did it."}


def test_a_failed_or_stopped_run_ends_as_the_protocol_says() -> None:
    failed = Translator(thread_id="t", run_id="r", top=TOP).rows(
        state(run(status="failed", stop_reason="max_model_calls", error="The assistant stopped.")))
    stopped = Translator(thread_id="t", run_id="r", top=TOP).rows(
        state(run(status="cancelled", stop_reason="superseded", error="Superseded.")))

    assert kinds(failed) == ["RUN_ERROR"] and (failed[0].code, failed[0].message) == (
        "max_model_calls", "The assistant stopped.")
    assert kinds(stopped) == ["RUN_FINISHED"] and stopped[0].outcome.type == "cancelled"
    assert stopped[0].metadata["stopReason"] == "superseded"


def test_a_reply_that_is_its_last_texts_words_with_spaces_around_them_is_not_said_again() -> None:
    """A run ends with its last text stripped: the client holds those words already, and reads them once."""
    translator = Translator(thread_id="t", run_id="r", top=TOP)

    events = translator.rows(state(run(status="succeeded", steps=[step(1, "model_call", text="All done.\n")]),
                                   reply="All done."))

    assert [(event.message_id, event.delta) for event in events if event.type == EventType.TEXT_MESSAGE_CONTENT] == [
        ("msg-1-1", "All done.\n")]


def handed_over_tree(*, top_steps: list[dict[str, Any]], member_text: str, answered_by: int | None = 2,
                     reply: str | None = None) -> dict[str, Any]:
    """A top run whose reply is the answer of its member (run 2, the clerk), which listed the tasks and then said
    `member_text`: a handoff, as the rows record it once the tree has finished."""
    answer = reply if reply is not None else member_text
    member = run(2, "succeeded", [step(1, "model_call", run=2), step(2, run=2, tool="tracker_task_list"),
                                  step(3, "model_call", run=2, text=member_text)],
                 reply=answer, member="clerk", parent_run_id=TOP, asked_in=100 + top_steps[-1]["seq"],
                 task="List the tasks.")
    tree = state(run(status="succeeded", steps=top_steps, answered_by=answered_by), member, reply=answer)
    tree["reply"]["member"] = "clerk"
    return tree


def asks_clerk(seq: int, **result: Any) -> dict[str, Any]:
    return step(seq, tool="ask_clerk", result={"status": "answered", "member": "clerk", "child_run_id": 2,
                                               "answer": "Two tasks.", "hands_over": True, **result})


def said_texts(events: list[Any]) -> list[tuple[str, str | None, str]]:
    """Each text message said: its id, the subagent it is attributed to, and its whole text."""
    texts: dict[str, list[Any]] = {}
    for event in events:
        if event.type == EventType.TEXT_MESSAGE_START:
            texts[event.message_id] = [event.subagent_run_id, ""]
        elif event.type == EventType.TEXT_MESSAGE_CONTENT:
            texts[event.message_id][1] += event.delta
    return [(wire, by, text) for wire, (by, text) in texts.items()]


def test_a_handed_over_answer_is_said_once_as_the_members_text_and_the_end_names_who_wrote_it() -> None:
    """The model asked the clerk alone, and the clerk's answer is the reply: the client holds it as the clerk's
    text, so the reply is not said again as a message of its own."""
    translator = Translator(thread_id="t", run_id="r", top=TOP)

    events = translator.rows(handed_over_tree(top_steps=[step(1, "model_call"), asks_clerk(2)],
                                              member_text="Two tasks."))

    assert said_texts(events) == [("msg-2-3", "run-2", "Two tasks.")]
    assert kinds(events) == [
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "SUBAGENT_STARTED",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_STARTED", "TOOL_CALL_RESULT", "STEP_FINISHED",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "SUBAGENT_FINISHED",
        "STEP_STARTED", "TOOL_CALL_RESULT", "STEP_FINISHED", "RUN_FINISHED"]
    end = events[-1]
    assert end.result == {"reply": "Two tasks."}
    assert end.metadata == {"assistantRunId": TOP, "answeredBy": "run-2", "member": "clerk"}


def test_a_handed_over_answer_streamed_by_the_member_is_not_said_again_when_the_run_ends() -> None:
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    route = {"member": "clerk", "parent_run_id": TOP, "asked_in": 102, "answers_person": True}
    tree = handed_over_tree(top_steps=[step(1, "model_call"), asks_clerk(2)], member_text="Two tasks.")
    working = state(run(status="awaiting_members", steps=[step(1, "model_call"), {
        **asks_clerk(2), "state": "started", "result": {"status": "asked", "member": "clerk", "child_run_id": 2,
                                                        "hands_over": True}}]),
        {**tree["runs"][1], "status": "running", "steps": tree["runs"][1]["steps"][:2]})

    events = translator.rows(working)
    events += translator.token(2, "Two ", route) + translator.token(2, "tasks.", route)
    events += translator.rows(tree)

    assert said_texts(events) == [("msg-2-3", "run-2", "Two tasks.")]
    assert kinds(events)[-1] == "RUN_FINISHED" and not translator.owe_snapshot


def test_a_routed_request_with_no_model_call_of_its_own_says_the_members_answer_once() -> None:
    """A request routed to its member as recorded before a routed run became the member's own: the top run made
    no model call; its one step is the member's call. A thread that holds one still reads."""
    translator = Translator(thread_id="t", run_id="r", top=TOP)

    events = translator.rows(handed_over_tree(
        top_steps=[asks_clerk(1, routed="routed to clerk: intent tracker_task_list")], member_text="Two tasks."))

    assert said_texts(events) == [("msg-2-3", "run-2", "Two tasks.")]
    [ask] = [event for event in events
             if event.type == EventType.TOOL_CALL_START and event.tool_call_name == "ask_clerk"]
    assert ask.parent_message_id is None and ask.subagent_run_id is None


def test_a_handed_over_reply_the_member_did_not_write_as_text_is_said_once_as_the_reply() -> None:
    """The member's last call wrote no text (its reply is the fallback "Done."): the reply is said, once, as
    the run's own message."""
    translator = Translator(thread_id="t", run_id="r", top=TOP)

    events = translator.rows(handed_over_tree(top_steps=[step(1, "model_call"), asks_clerk(2)], member_text="",
                                              reply="Done."))

    assert said_texts(events) == [("reply-9", None, "Done.")]



def test_a_steps_card_is_said_once_between_its_result_and_the_steps_end() -> None:
    translator = Translator(thread_id="t", run_id="r", top=TOP)
    card = '<p><a href="/tracker/tasks/3/">Buy milk</a></p>'
    drawn = {**step(1, tool="tracker_task_create"), "card": card}

    said = translator.rows(state(run(steps=[drawn, step(2, tool="plain")])))
    again = translator.rows(state(run(steps=[drawn, step(2, tool="plain")])))

    names = [(event.type.value, getattr(event, "name", None)) for event in said]
    result = names.index(("TOOL_CALL_RESULT", None))
    assert names[result + 1:result + 3] == [("CUSTOM", "assistant.card"), ("STEP_FINISHED", None)]
    [custom] = [event for event in said if event.type == EventType.CUSTOM]
    assert custom.value == {"toolCallId": "call-1-1", "html": card, "assistantRunId": TOP, "stepId": 101}
    # A step without a card has none; rows read again say nothing twice.
    assert [event.type for event in said].count(EventType.CUSTOM) == 1 and again == []
