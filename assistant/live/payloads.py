"""The JSON shapes of chats, messages, runs and steps in live events (documented in docs/protocol.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from assistant.attachments.store import attachment_payload
from assistant.channel_policies import channel_policy
from assistant.live.events import QUIET
from assistant.live.markdown import render_markdown
from assistant.live.selectors import chat_latest_message
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.page_context.read import PageContext
from assistant.tools.declarations import ViewTool
from assistant.tools.registry import registry


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# The `preview` of a chat: the start of its newest message, on one line.
PREVIEW_CHARS = 120
_LOOK_UP: Any = object()


def chat_payload(chat: AgentChat, *, latest: AgentMessage | None = _LOOK_UP) -> dict[str, Any]:
    """The chat, with its last activity (the time of its newest message, the order of the person's list)
    and a preview of that message. `latest` is that message (None: the chat has none) when the caller
    has it already; otherwise it is looked up (one query)."""
    if latest is _LOOK_UP:
        latest = chat_latest_message(chat=chat)
    return {
        "id": chat.pk, "title": chat.title, "spec": chat.spec, "channel": chat.channel,
        "created_at": _time(chat.created_at), "updated_at": _time(chat.updated_at),
        "last_activity": _time(chat.last_activity_at),
        "preview": " ".join(latest.content.split())[:PREVIEW_CHARS] if latest is not None else "",
    }


def message_payload(message: AgentMessage, branch: dict[str, Any] | None = None,
                    attachments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A message; a reply also carries its Markdown as safe HTML and the person's feedback on its run
    (load messages with `select_related("run")`: the feedback is read from the run). `branch`: its place among
    its siblings and what the other branches did (assistant/live/threads.py `branch_payloads`), for a message
    that has any. `attachments`: the files sent with it as payloads; without them, those prefetched with it
    (`prefetch_related("attachments")`), else none."""
    is_reply = message.role == AgentMessage.Role.ASSISTANT
    return {
        "id": message.pk, "chat_id": message.chat_id, "role": message.role, "content": message.content,
        "run_id": message.run_id, "parent_id": message.parent_id, "created_at": _time(message.created_at),
        "html": render_markdown(message.content, reply_links(message)) if is_reply else None,
        "feedback": feedback_payload(message.run) if is_reply and message.run_id is not None else None,
        "about": _asked_about(message),
        # A reply a member wrote itself (a handoff): the member, which the thread names beside it.
        "member": message.member or None,
        "branch": branch,
        "attachments": attachments if attachments is not None else _prefetched_attachments(message),
    }


def reply_links(message: AgentMessage) -> frozenset[str] | None:
    """The pages of the site a reply may link to, as render_markdown takes them (None: any, for older replies)."""
    return frozenset(message.links) if isinstance(message.links, list) else None


def _prefetched_attachments(message: AgentMessage) -> list[dict[str, Any]]:
    prefetched = getattr(message, "_prefetched_objects_cache", {}).get("attachments")
    return [attachment_payload(each) for each in prefetched] if prefetched is not None else []


def _asked_about(message: AgentMessage) -> str | None:
    """For a question asked from a page: what the assistant saw of it ("project “Home”"), from its run as
    loaded with it (never a query of its own: null when the run was not loaded)."""
    run = message._state.fields_cache.get("run") if message.role == AgentMessage.Role.USER else None
    seen = PageContext.from_data((run.config or {}).get("page")) if run is not None else None
    return seen.about if seen is not None else None


def feedback_payload(run: AgentRun | None) -> dict[str, Any] | None:
    """The person's thumbs and comment on a run: `quality_score` 1.0 is up, 0.0 down, null none."""
    if run is None or run.quality_score is None:
        return None
    return {"score": 1 if run.quality_score >= 0.5 else -1, "comment": run.feedback_comment}


def run_payload(run: AgentRun) -> dict[str, Any]:
    """A run; a member's run (one another run asked) also names the run that asked it, the step that asked,
    its top run and the member (its spec), all null for a top run."""
    is_member = run.parent_id is not None
    return {
        "id": run.pk, "chat_id": run.chat_id, "status": run.status, "stop_reason": run.stop_reason,
        "parent_run_id": run.parent_id, "root_run_id": run.root_id, "asked_in": run.asked_in_id,
        "member": run.spec if is_member else None, "task": run.task if is_member else None,
        "model": run.model, "reply": run.reply, "error": run.error,
        "channel": run.channel, "client": run.client_name or None,
        "usage": {
            "prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens,
            "total_tokens": run.total_tokens,
        },
        "model_calls": run.model_calls, "tool_calls": run.tool_calls, "tool_errors": run.tool_errors,
        "created_at": _time(run.created_at), "started_at": _time(run.started_at),
        "finished_at": _time(run.finished_at), "duration_ms": run.duration_ms,
    }


def step_payload(step: AgentStep) -> dict[str, Any]:
    return {
        "id": step.pk, "run_id": step.run_id, "seq": step.seq, "kind": step.kind, "state": step.state,
        "tool_name": step.tool_name, "call_id": step.call_id, "arguments": step.arguments,
        "asked_arguments": step.asked_arguments, "result": step.result,
        "took_effect": step.took_effect, "reason": step.reason, "confirmation": step.confirmation,
        "summary": step.summary or None, "containment": step.containment, "card": step.card or None,
        "usage": {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens},
        "duration_ms": step.duration_ms, "created_at": _time(step.created_at),
        "changes": step_changes(step),
    }


def step_changes(step: AgentStep) -> list[str]:
    """The models (`"app_label.model_name"`) a step changed, from its tool's declaration: the view's model
    (its `model`, `queryset`, or its form's model) for a write that took effect; reads change nothing,
    and a view whose model nothing declares gives []."""
    if step.kind != AgentStep.Kind.TOOL_CALL or step.took_effect is not True:
        return []
    definition = registry.get(step.tool_name)
    if not isinstance(definition, ViewTool) or definition.kind != "write":
        return []
    model = definition.model
    if model is None and definition.is_class_view:
        # A CreateView declares its form, not its model: the form's model is what it writes.
        form_class = getattr(definition.view, "form_class", None)
        model = getattr(getattr(form_class, "_meta", None), "model", None)
    return [model._meta.label_lower] if model is not None else []


def run_event(event_type: str, run: AgentRun, /, **extra: Any) -> dict[str, Any]:
    """An event about one run: every such event names its run and chat so a client can route it. An event
    about a member's run also names the run that asked it, its top run and the member (its spec)."""
    tree = ({"parent_run_id": run.parent_id, "root_run_id": run.root_id, "member": run.spec,
             "asked_in": run.asked_in_id} if run.parent_id is not None else {})
    event = {"type": event_type, "run_id": run.pk, "chat_id": run.chat_id, **tree, **extra}
    if not channel_policy(run.channel).shown_to_person:
        # A run of a channel its person never sees (an eval's replay, staff's): its events are not published.
        event[QUIET] = True
    return event
