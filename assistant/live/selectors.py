"""Reads for the consumer, the pages and the run loop. Everything is scoped to one owner, and a chat its
person deleted is gone for them: `for_user` never returns it, its messages, runs or steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from assistant.channel_policies import PANEL
from assistant.live.threads import thread_ids
from assistant.models import AgentChat, AgentMessage, AgentPlan, AgentRun, AgentStep


class NotFound(Exception):
    """The row does not exist or is not the person's: the two are indistinguishable on purpose."""


class CursorNotFound(NotFound):
    """A paging cursor (`before`) that names no row of the person's in what is being paged."""


def chat_current(*, user: Any) -> AgentChat | None:
    """A person's most recently used chat that they talk in (a chat of their agent's calls is opened from
    the list, never by default)."""
    return AgentChat.objects.for_user(user).filter(channel=PANEL.value).order_by("-updated_at", "-id").first()


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


def _shown_messages(chat_id: Any) -> QuerySet[AgentMessage]:
    """What the person sees of a chat: their messages and the replies (summaries are the assistant's own notes)."""
    return AgentMessage.objects.filter(chat_id=chat_id).exclude(role=AgentMessage.Role.SUMMARY)


def _older_than(rows: QuerySet[Any], time_field: str, cursor_id: int) -> QuerySet[Any]:
    """`rows` that come before the row `cursor_id` of `rows` in (time_field, id) order, newest first.

    The cursor's time is a subquery, so the page stays one query, and the bound `time_field <= that time`
    lets the database walk its (…, time, id) index from the cursor instead of filtering from the top.
    A cursor that is not among `rows` gives no rows (the caller then says why)."""
    cursor_time = Subquery(rows.filter(pk=cursor_id).values(time_field)[:1])
    return rows.filter(**{f"{time_field}__lte": cursor_time}).exclude(**{time_field: cursor_time, "id__gte": cursor_id})


@dataclass(frozen=True)
class ChatsPage:
    chats: list[AgentChat]
    # The newest message the person sees in each chat of the page, by chat id (absent: none yet).
    latest: dict[int, AgentMessage]
    has_more: bool


def chats_list(*, user: Any, before: int | None = None, limit: int = 30) -> ChatsPage:
    """The person's chats, newest activity first (the time of a chat's newest message, the person's or a
    reply), `limit` at a time, after the chat `before` in that order when given.

    Two queries: the page, with each chat's newest message id beside it, and those messages."""
    chats = AgentChat.objects.for_user(user)
    rows = chats if before is None else _older_than(chats, "last_activity_at", before)
    newest = _shown_messages(OuterRef("pk")).order_by("-created_at", "-id").values("id")[:1]
    # A chat's preview is the end of the branch its person reads (its newest message until they branch).
    latest_id = Coalesce(F("leaf_id"), Subquery(newest))
    page = list(rows.annotate(latest_message_id=latest_id).order_by("-last_activity_at", "-id")[: limit + 1])
    if before is not None and not page and not chats.filter(pk=before).exists():
        raise CursorNotFound(f"No chat {before!r}.")
    has_more = len(page) > limit
    page = page[:limit]
    wanted = [chat.latest_message_id for chat in page if chat.latest_message_id is not None]
    latest = ({message.chat_id: message for message in AgentMessage.objects.filter(pk__in=wanted).order_by()}
              if wanted else {})
    return ChatsPage(chats=page, latest=latest, has_more=has_more)


def chat_latest_message(*, chat: AgentChat) -> AgentMessage | None:
    """The end of the branch the person reads: its newest message until they branch."""
    if chat.leaf_id is not None:
        return AgentMessage.objects.filter(pk=chat.leaf_id).first()
    return _shown_messages(chat.pk).order_by("-created_at", "-id").first()


def chat_messages(*, chat: AgentChat) -> list[AgentMessage]:
    """Every message the person sees in the chat, oldest first."""
    # The run comes along: a reply's payload carries the feedback stored on it.
    return list(_shown_messages(chat.pk).select_related("run").order_by("created_at", "id"))


@dataclass(frozen=True)
class MessagesPage:
    messages: list[AgentMessage]  # oldest first
    has_more: bool
    # With steps: the runs those messages belong to (oldest first), and each run's steps by run id.
    runs: list[AgentRun] = field(default_factory=list)
    steps: dict[int, list[AgentStep]] = field(default_factory=dict)
    # With steps: the run that answers each of the person's messages on this branch, by message id (the run of the
    # answer that follows it, or its newest run when none does).
    answered_by: dict[int, int] = field(default_factory=dict)


def chat_messages_page(
    *, chat: AgentChat, before: int | None = None, limit: int = 50, with_steps: bool = False
) -> MessagesPage:
    """The newest `limit` messages of the branch the person reads (assistant/live/threads.py) older than the
    message `before` (the branch's newest without it), oldest first, and whether older ones exist. `with_steps`
    adds the runs that answer those messages on this branch, with the members they asked, and their steps."""
    ids = thread_ids(chat)
    if before is not None:
        if before not in ids:
            raise CursorNotFound(f"No message {before!r} in this chat.")
        ids = ids[: ids.index(before)]
    has_more = len(ids) > limit
    # The run comes along: a reply's payload carries the feedback stored on it.
    messages = list(AgentMessage.objects.filter(pk__in=ids[-limit:]).select_related("run")
                    .prefetch_related("attachments").order_by("id"))
    if not with_steps:
        return MessagesPage(messages=messages, has_more=has_more)
    answered_by = _answering_runs(messages)
    run_ids = set(answered_by.values()) | {m.run_id for m in messages if m.role != AgentMessage.Role.USER and m.run_id}
    if not run_ids:
        return MessagesPage(messages=messages, has_more=has_more)
    # With the members those runs asked (all of a tree names its top run): a reload nests them as they were.
    runs = list(AgentRun.objects.filter(chat=chat).filter(Q(pk__in=run_ids) | Q(root_id__in=run_ids))
                .order_by("created_at", "id"))
    steps: dict[int, list[AgentStep]] = {run.pk: [] for run in runs}
    for step in AgentStep.objects.filter(run_id__in=steps.keys()).order_by("run_id", "seq"):
        steps[step.run_id].append(step)
    return MessagesPage(messages=messages, has_more=has_more, runs=runs, steps=steps, answered_by=answered_by)


def _answering_runs(messages: list[AgentMessage]) -> dict[int, int]:
    """The run shown after each of the person's `messages`: the one whose answer follows it on the branch, else
    the newest run that answered it (its own, or one that answered it again) and left no answer: it failed, was
    stopped, or works on it now. A run whose answer is on another branch is that branch's."""
    following = {m.parent_id: m.run_id for m in messages if m.role == AgentMessage.Role.ASSISTANT and m.run_id}
    unanswered = [m for m in messages if m.role == AgentMessage.Role.USER and m.pk not in following]
    answered_by = {question: run_id for question, run_id in following.items() if question is not None}
    if not unanswered:
        return answered_by
    tried = {q.pk: [q.run_id] if q.run_id is not None else [] for q in unanswered}
    for run_id, asked in (AgentRun.objects.filter(answers_again_id__in=tried.keys())
                          .order_by("id").values_list("pk", "answers_again_id")):
        tried[asked].append(run_id)
    gave_answers = set(AgentMessage.objects.filter(parent_id__in=tried.keys(), role=AgentMessage.Role.ASSISTANT)
                       .values_list("run_id", flat=True))
    for question, run_ids in tried.items():
        left = [run_id for run_id in run_ids if run_id not in gave_answers]
        if left:
            answered_by[question] = left[-1]
    return answered_by


def chat_active_run(*, chat: AgentChat) -> AgentRun | None:
    return chat.runs.filter(parent__isnull=True, status__in=AgentRun.ACTIVE_STATUSES).first()


def run_steps(*, run: AgentRun) -> list[AgentStep]:
    return list(run.steps.order_by("seq"))


def run_pending_confirmation(*, run: AgentRun) -> AgentStep | None:
    return run.steps.filter(state=AgentStep.State.AWAITING_CONFIRMATION, confirmation="").order_by("seq").first()


def runs_plans(*, run_ids: list[int]) -> dict[int, AgentPlan]:
    """The plan each of these runs follows (its newest revision), by run id: one query."""
    if not run_ids:
        return {}
    newest = AgentPlan.objects.filter(run_id__in=run_ids).order_by("run_id", "-revision").distinct("run_id")
    return {plan.run_id: plan for plan in newest}


def run_members(*, run: AgentRun) -> list[AgentRun]:
    """The runs below the top run `run` (the members it asked, and those they asked), oldest first."""
    return list(AgentRun.objects.filter(root=run).order_by("created_at", "id"))


def tree_pending_confirmation(*, run: AgentRun, members: list[AgentRun]) -> AgentStep | None:
    """The question the top run `run` waits on: its own, or one of its members' (the oldest, when members
    asked at once each wait for an answer: every waiting step is among the tree's steps too)."""
    waiting = [r.pk for r in (run, *members) if r.status == AgentRun.Status.AWAITING_CONFIRMATION]
    if not waiting:
        return None
    return (AgentStep.objects.filter(run_id__in=waiting, state=AgentStep.State.AWAITING_CONFIRMATION,
                                     confirmation="").order_by("created_at", "id").first())
