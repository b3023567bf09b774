"""Writes behind the live channel: send, cancel, confirm, feedback. Each is one transaction and publishes its
events, and enqueues work, only after that transaction commits."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.db import connection, transaction
from django.utils import timezone

from assistant.access.authority import (
    SESSION_ENDED_MESSAGE,
    SentFrom,
    session_acts_as,
    session_ended_event,
    session_group,
)
from assistant.access.session_keys import SessionKeyUnreadable, session_key_digests, session_key_open
from assistant.attachments.store import attachment_copy, attachment_payload, attachments_remove_content
from assistant.channel_policies import PANEL, channel_policy
from assistant.conf import assistant_settings
from assistant.infra import event_names
from assistant.infra.text import readable_text
from assistant.infra.worker_queue import run_enqueue
from assistant.live.events import EVENT_SEQ_TIMEOUT_SECONDS, publish_to_user, publisher
from assistant.live.payloads import (
    chat_payload,
    feedback_payload,
    run_event,
)
from assistant.live.selectors import NotFound, run_pending_confirmation
from assistant.live.threads import THREAD_ROLES, branch_payloads, newest_below, thread_end
from assistant.models import AgentAttachment, AgentChat, AgentMessage, AgentPlan, AgentRun, AgentStep
from assistant.page_context import BadPage, page_context
from assistant.plans.offer import PLAN_TOOL
from assistant.plans.record import plan_event
from assistant.runs.allowances import AllowanceSpent, allowance_hold
from assistant.runs.cancel_flags import request_cancel
from assistant.runs.lifecycle import (
    STOPPED_BY_YOU,
    run_config,
    run_descendants,
    run_finish,
    run_open,
    run_resume_answered,
    run_sent_announce,
)
from assistant.runs.model_output import storable_json
from assistant.runs.rows import write_together
from assistant.tools import tool_for
from assistant.tools.describe import check_call
from assistant.tools.validation import validate_arguments
from assistant.tracing import handoff
from registry.services import profile_entry_score

# A chat's title, as the person renames it (the model field's length).
TITLE_MAX_CHARS = 200
# A new chat's title: the beginning of its first message.
TITLE_FROM_MESSAGE_CHARS = 80
# A send past RUNS_PER_MINUTE.
RATE_LIMITED = "You are sending messages faster than the assistant accepts; wait a minute."


class Refused(Exception):
    """The request is understood but cannot be done now; `code` is stable, `message` is for people; `fields`, for
    values the person typed, says what is wrong with each (by field name)."""

    def __init__(self, code: str, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fields = fields


@dataclass(frozen=True)
class Sent:
    chat: AgentChat
    message: AgentMessage
    run: AgentRun
    #: What `assistant.sent` says beside the chat, message and run (the message's branch and files, whether it
    #: answers again), so a sender told of it later (Redis down at the commit) is told the same.
    announced: dict[str, Any] = field(default_factory=dict)


@transaction.atomic
def chat_send(
    *, user: Any, content: str, chat_id: int | None = None, new_chat: bool = False, request_id: Any = None,
    sent_from: SentFrom | None = None, page: str | None = None, edit_of: int | None = None,
    attachments: list[int] | None = None,
) -> Sent:
    """Store the person's message and a queued run, and start the run after commit. `request_id`, if the
    client sent one, is echoed on the `assistant.sent` event so the sender can match it to its run.

    `sent_from` is the browser session the message came with (the socket always passes it): the run's
    tool calls are made with that session and the run stops when it ends. Without it (code that names
    the user explicitly) the run acts as `user` with no session (see assistant/access/authority.py).

    One active run per chat: while a run works on a chat, a new message there is refused; a run
    waiting for the person's confirmation is superseded (cancelled, its pending action declined).

    `page` is the path of the page the person asked from: its object, read now as the person (see
    assistant/page_context/), is kept on the run and given to the model as data; a page whose object
    they cannot open gives nothing. A `page` that is no path at all is refused (`bad_page`).

    The message follows the last message of the branch the person reads (assistant/live/threads.py). With
    `edit_of`, the id of one of the person's earlier messages, it is that message rewritten: a branch beside it,
    which the person then reads; the branch it came from is kept as it is, and nothing it did is undone.

    `attachments`: ids of files the person uploaded for this message (assistant/attachments/), theirs and not
    sent yet; with them the text may be empty. An edit may also name files the edited message was sent with:
    each goes again, as a copy that is the new message's.
    """
    text = (content or "").strip()
    attachments = list(dict.fromkeys(attachments or []))
    if not attachments and not readable_text(text, multiline=True):  # only invisible characters is nothing
        raise Refused("empty_message", "Type a message first.")
    if len(attachments) > assistant_settings.ATTACHMENTS_PER_MESSAGE:
        raise Refused("too_many_attachments", f"A message carries at most "
                                              f"{assistant_settings.ATTACHMENTS_PER_MESSAGE} files.")
    limit = assistant_settings.MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise Refused("message_too_long", f"Messages are limited to {limit} characters; this one has {len(text)}.")
    since = _within_the_rate(user)
    try:  # read before any lock is taken: it goes through the site's middleware as the person
        seen = page_context(user, page, sent_from=sent_from) if page is not None else None
    except BadPage as exc:
        raise Refused("bad_page", str(exc)) from None

    edited = _own_question(user, edit_of) if edit_of is not None else None
    if edited is not None:
        if chat_id is not None and chat_id != edited.chat_id:
            raise Refused("bad_request", "The message to edit is not in this chat.")
        chat_id = edited.chat_id
    # NO KEY UPDATE: a second send, a rename or a delete waits for this one, but a worker adding its reply
    # to the chat (a key-share lock on it) while it holds its run's row does not: with a plain FOR UPDATE
    # here, that worker and this send (which goes on to lock the chat's active run) waited on each other.
    # With the end of the branch its person reads, which the message follows: read with the chat, not after it.
    chats = AgentChat.objects.for_user(user).select_for_update(no_key=True).annotate(thread_end=thread_end())
    if chat_id is not None:
        chat = chats.filter(pk=chat_id).first()
        if chat is None:
            raise NotFound(f"No chat {chat_id!r}.")
        _refuse_agent_chat(chat)
    else:
        # The person's current chat is one they talk in: a chat of their agent's calls never is.
        chat = None if new_chat else chats.filter(channel=PANEL.value).order_by("-updated_at", "-id").first()
    given = _unsent_attachments(user, attachments, edited=edited)
    # The message's time, and so its chat's newest activity.
    now = timezone.now()
    made = chat is None
    if chat is None:
        # A chat made now has no runs to wait for, and takes its title from this first message (as a title
        # the person typed would be kept: see assistant/infra/text.py); its newest activity is this message.
        chat = AgentChat(owner=user, spec=assistant_settings.SPEC, last_activity_at=now,
                         title=readable_text(text or given[0].name, max_chars=TITLE_FROM_MESSAGE_CHARS))
        follows = None
    else:
        _supersede_waiting(chat)
        if not chat.title:
            chat.title = readable_text(text or given[0].name, max_chars=TITLE_FROM_MESSAGE_CHARS)
        follows = edited.parent_id if edited is not None else chat.thread_end

    config = run_config(spec=chat.spec)
    _within_the_allowance(user, config)
    config["trace"] = handoff(f"send {chat.spec}", {"gen_ai.agent.name": chat.spec})  # for the run's own span
    if seen is not None:
        config["page"] = seen.as_data()
    if given:
        # Checked and allowed: an edited message's own files are copied now, to be the new message's.
        given = [each if each.message_id is None else attachment_copy(each) for each in given]
        config["attachments"] = [each.pk for each in given]  # so its record knows, without looking, that it has any
    run = run_open(owner=user, chat=chat, spec=chat.spec, config=config, sent_from=sent_from)
    message = AgentMessage(chat=chat, owner=user, role=AgentMessage.Role.USER, content=text, run=run, created_at=now,
                           parent_id=follows)
    _write_within_the_rate(user, since, inserts=[chat, run, message] if made else [run, message])
    if given:
        AgentAttachment.objects.filter(pk__in=[each.pk for each in given]).update(message=message)
    if not made:
        # Marks it the person's current chat (updated_at), and its newest activity is this message. A chat the
        # person has branched reads on through this message (a chat never branched needs no leaf: its newest).
        chat.last_activity_at = message.created_at
        branched = edited is not None or chat.leaf_id is not None
        if branched:
            chat.leaf = message
        chat.save(update_fields=["title", "updated_at", "last_activity_at", *(["leaf"] if branched else [])])
    branch = branch_payloads([message]).get(message.pk) if edited is not None else None
    return _start(Sent(chat=chat, message=message, run=run, announced={
        "branch": branch, "attachments": [attachment_payload(each) for each in given]}), text, request_id=request_id)


@transaction.atomic
def chat_regenerate(*, user: Any, message_id: int, request_id: Any = None,
                    sent_from: SentFrom | None = None) -> Sent:
    """Answer one of the person's messages again: a new run whose answer is a branch beside the earlier answers,
    which stay as they were (nothing they did is undone). The person reads the new answer's branch. The run is
    a send like any other: the same rate, the same one active run per chat, the page it was first asked from."""
    since = _within_the_rate(user)
    question = _own_question(user, message_id)
    chat = AgentChat.objects.for_user(user).select_for_update(no_key=True).filter(pk=question.chat_id).first()
    if chat is None:
        raise NotFound(f"No message {message_id!r}.")
    _refuse_agent_chat(chat)
    _supersede_waiting(chat)
    config = run_config(spec=chat.spec)
    _within_the_allowance(user, config)
    config["trace"] = handoff(f"send {chat.spec}", {"gen_ai.agent.name": chat.spec})
    first = (AgentRun.objects.filter(pk=question.run_id).values_list("config", flat=True).first() or {}
             if question.run_id is not None else {})
    if first.get("page"):
        config["page"] = first["page"]  # "this" still means what it meant when the question was asked
    if first.get("attachments"):
        config["attachments"] = first["attachments"]  # the files sent with the question go with it again
    run = run_open(owner=user, chat=chat, spec=chat.spec, config=config, sent_from=sent_from)
    run.answers_again = question
    _write_within_the_rate(user, since, inserts=[run])
    chat.last_activity_at = timezone.now()
    chat.leaf = question  # the answer to come ends the branch the person reads (StepJournal.succeed)
    chat.save(update_fields=["updated_at", "last_activity_at", "leaf"])
    return _start(Sent(chat=chat, message=question, run=run, announced={
        "branch": branch_payloads([question]).get(question.pk), "answers_again": True,
        "attachments": [attachment_payload(each) for each in question.attachments.all()]}),
        question.content, request_id=request_id)


@transaction.atomic
def chat_branch(*, user: Any, message_id: int) -> AgentChat:
    """Read the chat along the branch through `message_id` (one of its messages, the person's or an answer), to
    where that branch ends. Refused while a run works or waits in the chat: its question is on the branch read
    now. Nothing any branch did is undone."""
    try:
        chosen = AgentMessage.objects.for_user(user).filter(role__in=THREAD_ROLES).get(pk=int(message_id))
    except (AgentMessage.DoesNotExist, TypeError, ValueError):
        raise NotFound(f"No message {message_id!r}.") from None
    chat = AgentChat.objects.for_user(user).select_for_update(no_key=True).get(pk=chosen.chat_id)
    _refuse_agent_chat(chat)
    if AgentRun.objects.filter(chat=chat, parent__isnull=True, status__in=AgentRun.ACTIVE_STATUSES).exists():
        raise Refused("run_active", "The assistant is still at work in this chat: wait for it, answer it or stop "
                                    "it before reading another branch.")
    chat.leaf_id = newest_below(chosen.pk)
    chat.save(update_fields=["leaf"])
    publish_to_user(user.pk, {"type": event_names.THREAD_CHANGED, "chat_id": chat.pk, "leaf_id": chat.leaf_id})
    return chat


def _unsent_attachments(user: Any, ids: list[int], *, edited: AgentMessage | None = None) -> list[AgentAttachment]:
    """The person's own attachments `ids`, locked for this send: each uploaded, kept and not sent with another
    message (two tabs sending one file: the second finds it sent). Another person's is as missing. For an edit,
    a file the edited message was sent with (and still kept) is found too: the send copies it."""
    if not ids:
        return []
    kept = AgentAttachment.objects.for_user(user).filter(pk__in=ids, removed_at__isnull=True)
    found = {each.pk: each for each in kept.select_for_update(of=("self",)).filter(message__isnull=True)}
    if edited is not None:
        found.update({each.pk: each for each in kept.filter(message=edited).exclude(pk__in=found)})
    missing = [each for each in ids if each not in found]
    if missing:
        raise NotFound(f"No attachment {missing[0]!r} to send: it is not yours, or was sent already.")
    return [found[each] for each in ids]


def _own_question(user: Any, message_id: Any) -> AgentMessage:
    """One of the person's own messages (never an answer, a summary or another person's: all `not_found`)."""
    try:
        return AgentMessage.objects.for_user(user).get(pk=int(message_id), role=AgentMessage.Role.USER)
    except (AgentMessage.DoesNotExist, TypeError, ValueError):
        raise NotFound(f"No message {message_id!r}.") from None


def _refuse_agent_chat(chat: AgentChat) -> None:
    if chat.channel != PANEL.value:
        raise Refused("agent_chat", "This chat is the record of what your own agent did as you; start a new "
                                    "chat to talk to the assistant.")


def _supersede_waiting(chat: AgentChat) -> None:
    active = AgentRun.objects.select_for_update().filter(chat=chat, parent__isnull=True,
                                                         status__in=AgentRun.ACTIVE_STATUSES).first()
    if active is not None:
        _supersede(active)


def _within_the_rate(user: Any) -> datetime:
    """Refuse a send past RUNS_PER_MINUTE (early: `_write_within_the_rate` decides); the minute's start."""
    per_minute = assistant_settings.RUNS_PER_MINUTE
    since = timezone.now() - timedelta(minutes=1)
    if _sends_held_runs_counted(user.pk, since=since, at_most=per_minute) >= per_minute:
        raise Refused("rate_limited", RATE_LIMITED)
    return since


def _within_the_allowance(user: Any, config: dict[str, Any]) -> None:
    """Give the run no more than is left of the person's allowances (its config's token limit, and its hold), or
    refuse the send saying which is spent and when it resets (assistant/runs/allowances.py)."""
    try:
        allowance_hold(user, config)
    except AllowanceSpent as spent:
        raise Refused("allowance_spent", spent.message) from None


def _write_within_the_rate(user: Any, since: datetime, *, inserts: list[Any]) -> None:
    """The send's rows (a new chat, the run, the message): one statement, written only while the person's runs
    since `since`, counted by this statement itself, are fewer than the limit."""
    per_minute = assistant_settings.RUNS_PER_MINUTE
    written = write_together(guard=_under_the_limit_sql(), guard_params=(user.pk, since, per_minute, per_minute),
                             inserts=inserts)
    if written.answer is None:  # everything this send did so far is rolled back with its transaction
        raise Refused("rate_limited", RATE_LIMITED)


def _start(sent: Sent, question: str, *, request_id: Any) -> Sent:
    """Announce the send and enqueue its run, on commit.

    Announced, and out (numbered and published), before the run is enqueued (all on commit, in this order):
    the run's events, which its worker numbers, then always follow `assistant.sent` on every socket. A busy
    web process's publishing thread can wait its turn longer than a quick run takes, and a first message's
    reply then came before the message, to a panel that did not know the chat yet. It costs the send one trip
    to Redis; a Redis that does not answer holds it up no longer than the count's own timeout. The question
    rides along so the worker can embed it for recall at once."""
    run_sent_announce(sent.run, sent.chat, sent.message, request_id=request_id, **sent.announced)
    transaction.on_commit(lambda: publisher.flush(timeout=EVENT_SEQ_TIMEOUT_SECONDS))
    run_enqueue(sent.run.pk, {"question": question, "embedder": sent.run.config["embedder"]})
    return sent


@functools.cache
def _recent_runs_sql() -> str:
    """The person's sends since a time: the top runs of their panel (and page) chats. The members a request
    asks, the calls of their own agent (limited per token) and the runs an eval replays as them are not
    messages they sent."""
    table = AgentRun._meta.db_table
    return (f'SELECT count(*) FROM (SELECT 1 FROM "{table}" WHERE "owner_id" = %s '  # noqa: S608 (the model's table)
            f"AND \"parent_id\" IS NULL AND \"channel\" = '{PANEL.value}' "
            'AND "created_at" >= %s LIMIT %s) AS "recent"')


@functools.cache
def _under_the_limit_sql() -> str:
    """The send's guard: a row while the person's runs since the time given are fewer than the limit."""
    return f'SELECT true AS "answer" WHERE ({_recent_runs_sql()}) < %s'  # noqa: S608 (made here)


def _sends_held_runs_counted(user_id: Any, *, since: datetime, at_most: int) -> int:
    """Hold the person's other sends until this one's transaction ends, and count their runs since `since`, no
    further than `at_most`: one plain statement, so every send asks at no extra cost.

    The hold makes the limit exact when sends arrive at once (each was counted before any of them wrote):
    the send's insert is guarded by the same count (`_under_the_limit_sql`), and that statement, begun
    after the hold was granted, sees every run a send that held it before has committed. The count here is
    this statement's own, taken as it began, so it may miss one of those: it refuses early, before the
    page is read and the chat locked, in the usual case, and the guard decides. A transaction-scoped
    advisory lock, keyed by the person: nothing to release, and no row that anything else waits on."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_xact_lock(hashtextextended(%s, 0)), ({_recent_runs_sql()})",
                       [f"assistant.sends:{user_id}", user_id, since, at_most])
        return int(cursor.fetchone()[1])


def _supersede(run: AgentRun) -> None:
    """A new message in a chat whose run (`run`, locked) waits for the person: that run and its members
    end, their pending actions not taken. A run with a member still at work is not waiting for the person:
    the message is refused, as while the run itself works."""
    below = run_descendants(run, active=True)
    if run.status not in AgentRun.WAITING_STATUSES or any(
        member.status not in AgentRun.WAITING_STATUSES for member in below
    ):
        raise Refused(
            "run_active",
            "The assistant is still working on your previous message in this chat. Wait for it, or stop it.",
        )
    for waiting in [*reversed(below), run]:
        run_finish(run=waiting, status=AgentRun.Status.CANCELLED, stop_reason=AgentRun.StopReason.SUPERSEDED,
                   error="Superseded by a newer message; the pending action was not taken.")


@transaction.atomic
def run_cancel(*, user: Any, run_id: int) -> AgentRun:
    """Stop a run, with every member it asked. Queued or waiting runs end at once; a working run stops at
    its next step boundary (or within a moment while the model streams) and keeps the steps it took. A
    member's run is stopped by stopping its top run: the person stops their request, whichever part of
    it they pressed Stop on."""
    # Only the run's row is locked, not the chat joined to see that it is not deleted: sends and
    # deletes lock the chat first and the run second, and a worker's reply holds the run.
    runs = AgentRun.objects.for_user(user).select_for_update(of=("self",))
    run = runs.filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No run {run_id!r}.")
    if run.root_id is not None:
        run = runs.get(pk=run.root_id)
    return _cancel(run)


def _cancel(run: AgentRun) -> AgentRun:
    """Stop `run` (locked by the caller) and every active run below it, the deepest first; see `run_cancel`."""
    if not run.is_active:
        return run
    for below in reversed(run_descendants(run, active=True)):
        _stop_one(below)
    return _stop_one(run)


def _stop_one(run: AgentRun) -> AgentRun:
    if run.status == AgentRun.Status.RUNNING:
        # Its worker stops at its next step: every step it writes reads this flag (assistant/runs/lease.py).
        run.cancel_requested = True
        run.save(update_fields=["cancel_requested"])
        transaction.on_commit(lambda: request_cancel(run.pk))
        return run
    return run_finish(run=run, status=AgentRun.Status.CANCELLED, stop_reason=AgentRun.StopReason.CANCELLED,
                      error=STOPPED_BY_YOU)


#: How long a comment on a plan may be (the person's words instead of an approval).
MAX_PLAN_COMMENT_CHARS = 2000


@transaction.atomic
def run_confirm(*, user: Any, run_id: int, step_id: int, approve: bool, comment: str = "",
                arguments: dict[str, Any] | None = None) -> AgentRun:
    """Answer the question a run is waiting on; the run then goes on in a worker.

    The answer names the step it answers, the card the person saw. Anything but the step the run is
    waiting on now (one already answered, another run's, one that asked nothing) is refused as
    `stale_confirmation` and changes nothing: an approval can never land on an action nobody saw.
    Another person's run or step answers exactly like a missing one.

    `arguments`: the person approves the action with these values instead of the model's (approve with changes).
    They are checked as the tool's own arguments are; a value that does not fit is refused (`invalid_arguments`,
    with what is wrong with each field) and nothing changes: the run still waits. The step keeps what the model
    asked for (`asked_arguments`) beside what was approved, which is what runs."""
    run = AgentRun.objects.for_user(user).select_for_update(of=("self",)).filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No run {run_id!r}.")
    if not AgentStep.objects.for_user(user).filter(pk=step_id).exists():
        raise NotFound(f"No step {step_id!r}.")
    pending = run_pending_confirmation(run=run) if run.status == AgentRun.Status.AWAITING_CONFIRMATION else None
    if pending is None or pending.pk != step_id:
        raise Refused(
            "stale_confirmation",
            "That action is not the one waiting for your answer (it was answered already, or is not this "
            "run's question); nothing was done.",
        )
    answer_card = channel_policy(run.channel).answer_card
    if answer_card is not None:
        # A channel whose runs no worker of this site goes on with (the person's own agent's calls, which their
        # agent runs when it calls again) takes the answer its own way.
        answer_card(run, pending, approve, comment)
        return run
    plan = AgentPlan.objects.filter(made_in=pending).first() if pending.tool_name == PLAN_TOOL else None
    changed = () if arguments is None else _approve_with_changes(user, run, pending, arguments, approve=approve,
                                                                   plan=plan)
    comment = readable_text(comment or "", multiline=True)
    if comment and (approve or plan is None):
        raise Refused("bad_request", "A comment answers a plan instead of approving it: send it with approve false, "
                                     "for the step of a plan that waits for you.")
    if len(comment) > MAX_PLAN_COMMENT_CHARS:
        raise Refused("bad_request", f"Comments are limited to {MAX_PLAN_COMMENT_CHARS} characters; "
                                     f"this one has {len(comment)}.")
    pending.confirmation = AgentStep.Confirmation.APPROVED if approve else AgentStep.Confirmation.DENIED
    pending.reason = ("Approved with your changes; running." if changed else "Approved; running." if approve else
                      f"You asked for changes: {comment}" if comment else "Declined by you.")
    pending.save(update_fields=["confirmation", "reason", *changed])
    if plan is not None:
        # The plan shown, and only that revision: its row says how the person answered it.
        plan.approval = (AgentPlan.Approval.APPROVED if approve else
                         AgentPlan.Approval.COMMENTED if comment else AgentPlan.Approval.DENIED)
        plan.comment, plan.answered_at = comment, timezone.now()
        plan.save(update_fields=["approval", "comment", "answered_at", "updated_at"])
        publish_to_user(user.pk, plan_event(run, plan))
    run_resume_answered(run, pending)
    run_enqueue(run.pk)
    return run


def _approve_with_changes(user: Any, run: AgentRun, pending: AgentStep, arguments: Any, *, approve: bool,
                          plan: AgentPlan | None) -> tuple[str, ...]:
    """Put the person's values on the step that waits, keeping the model's, once they are checked as the tool's own
    arguments are; the fields changed, for the answer to save. Refused, changing nothing, when they may not be
    given here or do not fit."""
    if not approve or plan is not None or channel_policy(run.channel).answer_card is not None:
        raise Refused("bad_request", "Changed values go with an approval of an action the assistant waits on here "
                                     "(not a plan, and not a denial).")
    if not isinstance(arguments, dict):
        raise Refused("bad_request", '"arguments" must be an object of the action\'s values.')
    return approved_values(user, run, pending, arguments)


def approved_values(user: Any, run: AgentRun, pending: AgentStep, arguments: dict[str, Any]) -> tuple[str, ...]:
    """Put the values the person approved on the step that waits (approve with changes, from any channel), keeping
    the model's, once the tool's schema and then the view's own form, as the person, accept them; the fields changed,
    for the caller to save with its answer ((): the model's own values). Refused (`invalid_arguments`, each field's
    problem in `fields`), changing nothing, when they do not fit."""
    settings = run.config or {}
    tool = tool_for(user, pending.tool_name, settings.get("spec"), settings.get("permission_profile") or None)
    if tool is None:
        raise Refused("bad_request", "This action's values cannot be changed here; approve or deny it as it is.")
    problems = validate_arguments(arguments, tool.parameters)
    if problems:
        raise Refused("invalid_arguments", "Some values do not fit this action; nothing was done.", fields=problems)
    approved = storable_json(arguments)[0]
    if approved == pending.arguments:
        return ()  # the values as the model asked: an approval like any other
    # The view's own form, as the person, says what it would refuse; its rules beyond the schema count too.
    summary, refused = check_call(user, tool, approved)
    if refused:
        whole = refused.pop(NON_FIELD_ERRORS, "")
        raise Refused("invalid_arguments", f"Some values do not fit this action; nothing was done. {whole}".strip(),
                      fields=refused or None)
    pending.asked_arguments = pending.arguments
    pending.arguments = approved
    pending.summary = summary  # the step says what ran, in words
    return ("arguments", "asked_arguments", "summary")


FEEDBACK_SCORES = {1: 1.0, -1: 0.0, 0: None}
MAX_FEEDBACK_COMMENT_CHARS = 2000


@transaction.atomic
def run_feedback(*, user: Any, run_id: int, score: int, comment: str = "") -> AgentRun:
    """The person's thumbs up (1) or down (-1) on a finished run's answer, with an optional comment, or 0
    to take it back. Stored on the run as its quality score (1.0 / 0.0 / null) and announced to every
    socket of the person as `assistant.feedback_saved`. Bad input is refused whole: nothing is stored."""
    if isinstance(score, bool) or not isinstance(score, int) or score not in FEEDBACK_SCORES:
        raise Refused("bad_request", '"score" must be 1 (thumbs up), -1 (thumbs down) or 0 (take it back).')
    if not isinstance(comment, str):
        raise Refused("bad_request", '"comment" must be a string.')
    if "\x00" in comment:  # PostgreSQL text cannot hold it (refused, not dropped: the protocol says so)
        raise Refused("bad_request", '"comment" must not contain NUL characters.')
    # Staff read it in the admin: without bidirectional controls or other invisible characters.
    comment = readable_text(comment, multiline=True)
    if len(comment) > MAX_FEEDBACK_COMMENT_CHARS:
        raise Refused("bad_request", f"Comments are limited to {MAX_FEEDBACK_COMMENT_CHARS} characters; "
                                     f"this one has {len(comment)}.")
    if score == 0 and comment:
        raise Refused("bad_request", "A comment goes with a thumb up or down; to take feedback back, send none.")
    # Only the run's row: the chat joined to see that it is not deleted stays free for sends and replies.
    run = AgentRun.objects.for_user(user).select_for_update(of=("self",)).filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"No run {run_id!r}.")
    if run.is_active:
        raise Refused("bad_request", "Feedback is for answers: this run has not finished yet.")
    run.quality_score = FEEDBACK_SCORES[score]
    run.feedback_comment = comment
    run.feedback_at = timezone.now() if score else None
    run.save(update_fields=["quality_score", "feedback_comment", "feedback_at"])
    # The run's profile entry (written when it ended) follows, under the run's lock taken above.
    profile_entry_score(owner=run.owner_id, spec_name=run.spec, run_id=run.pk, quality_score=run.quality_score)
    message = run.messages.filter(role=AgentMessage.Role.ASSISTANT).order_by("-id").first()
    publish_to_user(user.pk, run_event(
        event_names.FEEDBACK_SAVED, run, message_id=message.pk if message is not None else None,
        feedback=feedback_payload(run),
    ))
    return run


def _chat_locked(*, user: Any, chat_id: int) -> AgentChat:
    """The person's chat, locked against a concurrent send, rename or delete. NO KEY UPDATE: a worker
    adding a message or a step to the chat (a key-share lock on it) is not held up, and cannot deadlock
    with this."""
    chat = AgentChat.objects.for_user(user).select_for_update(no_key=True).filter(pk=chat_id).first()
    if chat is None:
        raise NotFound(f"No chat {chat_id!r}.")
    return chat


@transaction.atomic
def chat_rename(*, user: Any, chat_id: int, title: str) -> AgentChat:
    """Give the person's chat a new title and tell every socket of theirs. The title is kept as others read
    it (`readable_text`: no control, invisible or bidirectional characters, one space between words, NFC)
    and must then be 1 to TITLE_MAX_CHARS characters. Renaming is not activity: the chat keeps its place in
    the list and does not become current."""
    text = readable_text(title)
    if not 1 <= len(text) <= TITLE_MAX_CHARS:
        raise Refused("bad_request", f"A chat's title must be 1 to {TITLE_MAX_CHARS} characters long, not counting "
                                     "spaces at its ends or invisible characters.")
    chat = _chat_locked(user=user, chat_id=chat_id)
    chat.title = text
    chat.save(update_fields=["title"])
    publish_to_user(user.pk, {"type": event_names.CHAT_UPDATED, "chat_id": chat.pk, "chat": chat_payload(chat)})
    return chat


@transaction.atomic
def chat_delete(*, user: Any, chat_id: int) -> AgentChat:
    """Delete the person's chat, for them: an active run in it is cancelled first (see `run_cancel`), then
    the chat, its messages, runs and steps are gone from everything the person can reach (`for_user`),
    and kept, untouched, for staff in the admin. Every socket of the person is told."""
    chat = _chat_locked(user=user, chat_id=chat_id)
    # After the chat's lock: a send that got it first has committed its run, and is cancelled here.
    active = AgentRun.objects.select_for_update().filter(chat=chat, parent__isnull=True,
                                                     status__in=AgentRun.ACTIVE_STATUSES).first()
    if active is not None:
        _cancel(active)
    chat.deleted_at = timezone.now()
    chat.save(update_fields=["deleted_at"])
    # The files sent in it are the person's, not evidence: their content goes now (their names stay for staff).
    attachments_remove_content(AgentAttachment.objects.filter(message__chat=chat))
    publish_to_user(user.pk, {"type": event_names.CHAT_DELETED, "chat_id": chat.pk})
    return chat


def on_user_logged_out(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    """Django's `user_logged_out`: end what the session was doing and close its sockets. Sent before the
    session is flushed, so its key is still known here."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        session_runs_end(session_key=key)


@transaction.atomic
def session_runs_end(*, session_key: str) -> list[AgentRun]:
    """The browser session messages were sent from has ended (logout, expiry, deletion, a changed password,
    a deactivated user): its queued and waiting runs end now as `session_ended`, their pending actions not
    taken, and every socket of that session is told and closes. A working run stops at its next step
    boundary, or within a moment while its model streams (as after a Stop), where its worker finds the
    session gone; its tool calls are refused before that."""
    # By the key's digests (under the current secret and each fallback): the rows hold no key in clear.
    digests = session_key_digests(session_key)
    runs = _session_digests_runs(digests)
    for run in runs:
        run_finish(run=run, status=AgentRun.Status.CANCELLED, stop_reason=AgentRun.StopReason.SESSION_ENDED,
                   error=SESSION_ENDED_MESSAGE)
    # A working run (a member among them) is asked to stop as a Stop would, within a moment even while its
    # model streams; its worker finds the session gone, and says so.
    working = list(AgentRun.objects.filter(session_digest__in=digests, status=AgentRun.Status.RUNNING)
                   .values_list("pk", flat=True))
    if working:
        AgentRun.objects.filter(pk__in=working).update(cancel_requested=True)
        for run_id in working:
            transaction.on_commit(functools.partial(request_cancel, run_id))
    event = session_ended_event()
    transaction.on_commit(lambda: publisher.publish(session_group(session_key), event))
    return runs


def ended_sessions_runs_end(*, user: Any) -> list[AgentRun]:
    """End the person's queued and waiting runs whose session ended while none of its sockets was open to
    notice (it expired, or was deleted, with the tab closed): called when the person connects again, so a
    new session never shows, or answers, a question the old one can no longer act on."""
    waiting = AgentRun.objects.for_user(user).filter(
        status__in=[AgentRun.Status.QUEUED, *AgentRun.WAITING_STATUSES]
    ).exclude(session_digest="")
    keys: set[str] = set()
    unreadable: set[str] = set()
    for digest, sealed in waiting.values_list("session_digest", "session_sealed"):
        try:
            keys.add(session_key_open(sealed))
        except SessionKeyUnreadable:
            unreadable.add(digest)
    ended: list[AgentRun] = []
    for key in keys:
        if not session_acts_as(key, user.pk):
            ended.extend(session_runs_end(session_key=key))
    if unreadable:
        # Sealed under a secret the site no longer has: such a session signs nobody in any more (its own
        # row was signed with that secret too), so its runs end as every ended session's do.
        with transaction.atomic():
            for run in _session_digests_runs(sorted(unreadable)):
                run_finish(run=run, status=AgentRun.Status.CANCELLED, stop_reason=AgentRun.StopReason.SESSION_ENDED,
                           error=SESSION_ENDED_MESSAGE)
                ended.append(run)
    return ended


def _session_digests_runs(digests: list[str]) -> list[AgentRun]:
    """The queued and waiting runs sent from the session of those digests, locked, members before the runs
    that asked them (a run's end closes its step that waits for a member)."""
    return list(AgentRun.objects.select_for_update().filter(
        session_digest__in=digests, status__in=[AgentRun.Status.QUEUED, *AgentRun.WAITING_STATUSES]
    ).order_by("-depth", "pk"))
