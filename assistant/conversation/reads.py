"""What the panel loads of a person's chats, each as the event that answers its request: a chat's state
(`assistant.load`), the list of chats (`assistant.chats`), and what the assistant sees of a page and suggests
there (`assistant.page`).

Each is one synchronous call for a database thread (the socket's consumer wraps it for its event loop). They
live here, above `live/`, because a chat's state carries its runs' plans, which `live/` may not import.
"""

from __future__ import annotations

from typing import Any

from assistant.access.authority import SentFrom
from assistant.conf import assistant_settings
from assistant.conversation import services
from assistant.conversation.frames import BadRequest
from assistant.infra import event_names
from assistant.live import selectors
from assistant.live.events import current_event_seq
from assistant.live.payloads import chat_payload, message_payload, run_payload, step_payload
from assistant.live.threads import branch_payloads
from assistant.models import AgentRun, AgentStep
from assistant.page_context import BadPage, page_context, suggestions
from assistant.plans.record import plan_payload
from assistant.runs.allowances import person_allowance_note
from assistant.tools import tool_for

# Pages of `assistant.load` (messages) and `assistant.chats` (chats): default and largest sizes.
LOAD_LIMIT_DEFAULT, LOAD_LIMIT_MAX = 50, 200
CHATS_LIMIT_DEFAULT, CHATS_LIMIT_MAX = 30, 100


def page_answer(user: Any, page: Any, chat_id: int | None, sent_from: SentFrom | None) -> dict[str, Any]:
    """`assistant.page_context`: what the assistant sees of `page` (null: nothing) and what it suggests
    there, under the spec of the chat `chat_id` (new chats' spec without it)."""
    try:
        seen = page_context(user, page, sent_from=sent_from) if page is not None else None
    except BadPage as exc:
        raise BadRequest("bad_page", str(exc)) from None
    chat = selectors.chat_get(user=user, chat_id=chat_id) if chat_id is not None else None
    spec = chat.spec if chat is not None else assistant_settings.SPEC
    offered = [suggestion.as_data() for suggestion in suggestions(user, spec, seen)]
    return {"type": event_names.PAGE_CONTEXT, "page": page,
            "about": {"text": seen.about, "kind": seen.kind, "id": seen.id} if seen is not None else None,
            "suggestions": offered}


def chat_state(user: Any, chat_id: int | None, *, before: int | None = None, limit: int = LOAD_LIMIT_DEFAULT,
                with_steps: bool = False) -> dict[str, Any]:
    """`assistant.messages_loaded`: the chat (the current one without `chat_id`), the newest `limit`
    messages older than the message `before` (the newest overall without it), its active run and that
    run's steps and pending question; with `with_steps`, also the runs of the returned messages and
    their steps; and `event_seq`, the person's count of events read before the database, so every event
    numbered up to it is in the answer (where a client's count starts)."""
    event_seq = current_event_seq(user.pk)
    chat = selectors.chat_get(user=user, chat_id=chat_id) if chat_id is not None else selectors.chat_current(user=user)
    if chat is None:
        state: dict[str, Any] = {"type": event_names.MESSAGES_LOADED, "chat": None, "messages": [],
                                 "active_run": None, "steps": [], "members": [], "plan": None,
                                 "pending_confirmation": None, "pending_tool": None,
                                 "has_more": False, "before": before, "event_seq": event_seq}
        if with_steps:
            state["runs"] = []
        return _with_allowance(state, user)
    page = selectors.chat_messages_page(chat=chat, before=before, limit=limit, with_steps=with_steps)
    run = selectors.chat_active_run(chat=chat)
    members = selectors.run_members(run=run) if run is not None else []
    pending = selectors.tree_pending_confirmation(run=run, members=members) if run is not None else None
    plans = selectors.runs_plans(run_ids=[r.pk for r in (run, *members)] if run is not None else [])
    # The newest page ends with the chat's newest message: no second look for the chat's preview.
    latest = {"latest": page.messages[-1] if page.messages else None} if before is None else {}
    # A chat its person never branched (no leaf) has no branches to look for.
    branches = branch_payloads(page.messages) if chat.leaf_id is not None else {}
    state = {
        "type": event_names.MESSAGES_LOADED,
        "chat": chat_payload(chat, **latest),
        "messages": [message_payload(message, branches.get(message.pk)) for message in page.messages],
        "has_more": page.has_more,
        "before": before,
        "active_run": run_payload(run) if run is not None else None,
        "steps": [step_payload(step) for step in selectors.run_steps(run=run)] if run is not None else [],
        # The members the active run asked, each with its steps (and plan): nested under the step that asked it.
        "members": [{**run_payload(member), "steps": [step_payload(step) for step in selectors.run_steps(run=member)],
                     "plan": _plan_or_none(plans.get(member.pk))} for member in members],
        # The plan the active run follows (its newest revision), if it made one.
        "plan": _plan_or_none(plans.get(run.pk)) if run is not None else None,
        "pending_confirmation": step_payload(pending) if pending is not None else None,
        # The tool it would run, as `assistant.confirm` says it: the card's form of values needs its schema.
        "pending_tool": _pending_tool(user, pending, [run, *members]) if pending is not None and run is not None
        else None,
        "event_seq": event_seq,
    }
    if with_steps:
        past_plans = selectors.runs_plans(run_ids=[past.pk for past in page.runs])
        # A top run names the person's message it answers on this branch (the panel draws it right after it).
        question_of = {run_id: question for question, run_id in page.answered_by.items()}
        state["runs"] = [{**run_payload(past), "steps": [step_payload(step) for step in page.steps[past.pk]],
                          "plan": _plan_or_none(past_plans.get(past.pk)), "question_id": question_of.get(past.pk)}
                         for past in page.runs]
    return _with_allowance(state, user)


def _with_allowance(state: dict[str, Any], user: Any) -> dict[str, Any]:
    """The newest page says, as a reply did, when little is left of the person's allowance (`allowance`, in
    words, or None): a reload keeps the note above the message box. An older page says nothing of it."""
    if state["before"] is None:
        state["allowance"] = person_allowance_note(user.pk)
    return state


def branch_state(user: Any, message_id: int, *, limit: int = LOAD_LIMIT_DEFAULT) -> dict[str, Any]:
    """`assistant.branch`: read the chat along the branch through the message `message_id` (services.chat_branch),
    answered as `assistant.load` answers for that chat, with the runs and their steps."""
    chat = services.chat_branch(user=user, message_id=message_id)
    return chat_state(user, chat.pk, limit=limit, with_steps=True)


def _pending_tool(user: Any, pending: AgentStep, runs: list[AgentRun]) -> dict[str, Any] | None:
    """The tool a waiting step would run, as its run may use it (its spec and profile): what its card says of it;
    None for a plan's step or a tool no longer offered."""
    asking = next((each for each in runs if each.pk == pending.run_id), None)
    settings = (asking.config or {}) if asking is not None else {}
    tool = tool_for(user, pending.tool_name, settings.get("spec"), settings.get("permission_profile") or None)
    if tool is None:
        return None
    return {"name": tool.name, "description": tool.description, "destructive": tool.destructive,
            "parameters": tool.parameters}


def _plan_or_none(plan: Any) -> dict[str, Any] | None:
    return plan_payload(plan) if plan is not None else None


def chats_listed(user: Any, *, before: int | None, limit: int) -> dict[str, Any]:
    page = selectors.chats_list(user=user, before=before, limit=limit)
    return {
        "type": event_names.CHATS_LISTED,
        "chats": [chat_payload(chat, latest=page.latest.get(chat.pk)) for chat in page.chats],
        "has_more": page.has_more,
    }
