"""Reads for the consumer, the pages and the run loop. Everything is scoped to one owner."""

from __future__ import annotations

from typing import Any

from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep


class NotFound(Exception):
    """The row does not exist or is not the person's: the two are indistinguishable on purpose."""


def chat_current(*, user: Any) -> AgentChat | None:
    """A person's most recently used chat."""
    return AgentChat.objects.for_user(user).order_by("-updated_at", "-id").first()


def chat_get(*, user: Any, chat_id: Any) -> AgentChat:
    try:
        return AgentChat.objects.for_user(user).get(pk=int(chat_id))
    except (AgentChat.DoesNotExist, TypeError, ValueError):
        raise NotFound(f"No chat {chat_id!r}.") from None


def run_get(*, user: Any, run_id: Any) -> AgentRun:
    try:
        return AgentRun.objects.for_user(user).get(pk=int(run_id))
    except (AgentRun.DoesNotExist, TypeError, ValueError):
        raise NotFound(f"No run {run_id!r}.") from None


def chat_messages(*, chat: AgentChat) -> list[AgentMessage]:
    """What the person sees: their messages and the replies (summaries are the assistant's own notes)."""
    # The run comes along: a reply's payload carries the feedback stored on it.
    messages = chat.messages.exclude(role=AgentMessage.Role.SUMMARY).select_related("run")
    return list(messages.order_by("created_at", "id"))


def chat_active_run(*, chat: AgentChat) -> AgentRun | None:
    return chat.runs.filter(status__in=AgentRun.ACTIVE_STATUSES).first()


def run_steps(*, run: AgentRun) -> list[AgentStep]:
    return list(run.steps.order_by("seq"))


def run_pending_confirmation(*, run: AgentRun) -> AgentStep | None:
    return run.steps.filter(state=AgentStep.State.AWAITING_CONFIRMATION, confirmation="").order_by("seq").first()
