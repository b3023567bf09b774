"""A run's lifecycle, in one place: the settings it is started with, its opening (from any channel), its
pauses (for the person, for its members), its going back on the queue, and its end — closing the row,
finishing what still waits, filing it once in its owner's profile, and announcing it.

The socket's services (a send, a cancel, a sign-out), the worker's turn (a pause, a reply, a limit, a crash),
the channels that run their own calls (assistant/mcp/) and the evals' replays all call this module; it calls
none of them. A run's status is written here and nowhere else, but for a worker's claim, which is the lease's
own statement (assistant/runs/lease.py). A run at any depth of a tree starts and ends here the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from django.db import connection, transaction
from django.db.models import Exists, Model, OuterRef
from django.dispatch import Signal
from django.utils import timezone

from assistant.access.authority import SentFrom
from assistant.channel_policies import PANEL, channel_policy
from assistant.conf import assistant_settings
from assistant.infra import event_names
from assistant.live.events import publish_to_user
from assistant.live.payloads import chat_payload, message_payload, run_event, run_payload, step_payload
from assistant.llm.prices import price_table
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep, step_counts
from assistant.plans.record import run_plan_close
from assistant.runs.allowances import ALLOWANCE, ALLOWANCE_TREE
from assistant.runs.cancel_flags import request_cancel
from assistant.runs.lease import LeaseLost, write_fenced
from assistant.runs.profile import run_intent, run_profile_record
from assistant.society.budget import SHARED_LIMITS, WALL, BudgetExhausted, reserve
from assistant.society.members import member
from assistant.society.outcome import member_outcome, subtree_effects
from assistant.tracing import handoff

# What a run the person stopped says, wherever it stopped.
STOPPED_BY_YOU = "Stopped by you."


#: Sent once a top run that is not filed in its owner's profile has ended and that end has committed, with
#: `run_id`: the app whose channel says so (assistant/channel_policies.py) takes it up then (an eval grades its
#: replay: assistant/evals/). Runs filed in the profile end without it.
run_ended = Signal()


class CancelledBeforeEnd(Exception):
    """A worker's run could not end as `succeeded`: its person had already asked to stop it. Nothing was
    changed; the worker ends it as cancelled instead."""


def run_config(*, spec: str | None = None) -> dict[str, Any]:
    """The settings a new run under `spec` (default: the SPEC setting) keeps for its whole life (see
    AgentRun.config). Its permission profile, model, instructions and limits are the spec's own (see
    assistant/society/members.py); the global settings where the spec declares none."""
    s = assistant_settings
    spec = spec or s.SPEC
    own: dict[str, Any] = {"model": s.MODEL, "instructions": s.INSTRUCTIONS, "plan_approval": s.PLAN_APPROVAL,
                           "containment": s.CONTAINMENT, "handoff": s.HANDOFF, "routing": s.ROUTING,
                           "max_model_calls": s.MAX_MODEL_CALLS,
                           "max_tool_calls": s.MAX_TOOL_CALLS, "max_wall_seconds": s.MAX_WALL_SECONDS,
                           "max_tokens_per_run": s.MAX_TOKENS_PER_RUN}
    try:
        seat = member(spec)
    except ValueError:
        # A spec or profile name that does not exist: the run then fails saying which (and
        # `manage.py check` names it at start-up), rather than the message being refused here.
        profile: str | None = None
    else:
        profile = seat.profile.name
        own.update(model=seat.model, instructions=seat.instructions, plan_approval=seat.plan_approval,
                   containment=seat.containment, handoff=seat.handoff, routing=seat.routing,
                   **{key: _as_setting(value) for key, value in seat.limits.items()})
    return {
        **own, "embedder": s.EMBEDDER, "spec": spec, "permission_profile": profile,
        "max_identical_tool_calls": s.MAX_IDENTICAL_TOOL_CALLS, "keep_messages": s.KEEP_MESSAGES,
        "recall_limit": s.RECALL_LIMIT, "plans": s.PLANS, "prices": price_table(),
    }


def _as_setting(value: float) -> int | float:
    """A limit as the settings write it: whole numbers stay whole (the run's config is JSON people read)."""
    return int(value) if float(value).is_integer() else value


def run_open(*, spec: str, config: dict[str, Any], channel: str = PANEL.value, sent_from: SentFrom | None = None,
             model: str | None = None, begun: datetime | None = None, asks_first: bool = False,
             **fields: Any) -> AgentRun:
    """A new run under `spec` with the settings it keeps for life (`run_config`), from any channel; `fields`
    name its person and chat (and a member's place in its tree). It is queued for a worker; a call of the
    person's own agent, which that agent runs itself, is instead begun at `begun`: running, or waiting for the
    person when it `asks_first`. It acts with the session it was sent from (stored as its digest and sealed
    key, never in clear); None for a run started by code that names its person. Not saved yet: the caller
    writes it (a send with the message it answers, in one statement) and enqueues a queued one
    (`assistant.tasks.run_enqueue`) in the same transaction."""
    if begun is None:
        opened: dict[str, Any] = {"status": AgentRun.Status.QUEUED}
    else:
        opened = {"status": AgentRun.Status.AWAITING_CONFIRMATION if asks_first else AgentRun.Status.RUNNING,
                  "started_at": begun, "clock_started_at": begun}
    return AgentRun(spec=spec, model=str(config["model"]) if model is None else model, config=config,
                    channel=channel, **opened, **(sent_from.stored() if sent_from else {}), **fields)


def run_sent_announce(run: AgentRun, chat: AgentChat, message: AgentMessage, *, branch: dict[str, Any] | None = None,
                      attachments: list[dict[str, Any]] | None = None, **extra: Any) -> None:
    """Announce a run just opened with the person's message (`assistant.sent`); `branch`: the message's place
    among its branches (an edit); `attachments`: the files sent with it, as payloads; `extra`: a send's
    `request_id`, and `answers_again` for a run that answers the message again."""
    publish_to_user(run.owner_id, sent_event(run, chat, message, branch=branch, attachments=attachments, **extra))


def sent_event(run: AgentRun, chat: AgentChat, message: AgentMessage, *, branch: dict[str, Any] | None = None,
               attachments: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """`assistant.sent`: the chat, the person's message and the run that answers it."""
    return run_event(event_names.SENT, run, chat=chat_payload(chat, latest=message),
                     message=message_payload(message, branch, attachments), run=run_payload(run), **extra)


class DelegationRefused(Exception):
    """A member cannot be asked from here (the tree is too deep, the member is already on the path, or the
    budget is spent); `message` says why, for the model that asked."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _ancestors(run: AgentRun) -> list[AgentRun]:
    """The runs above `run`, its parent first (one query per level above it)."""
    found, current = [], run
    while current.parent_id is not None:
        current = AgentRun.objects.only("pk", "spec", "parent_id").get(pk=current.parent_id)
        found.append(current)
    return found


def run_path(run: AgentRun) -> list[str]:
    """The specs from the top run down to `run`, `run`'s own last."""
    return [above.spec for above in reversed(_ancestors(run))] + [run.spec]


def run_ancestor_ids(run: AgentRun) -> list[int]:
    """The runs above `run`: its parent, its parent's parent, … up to its top run."""
    return [above.pk for above in _ancestors(run)]


def run_path_stop_requested(run: AgentRun) -> bool:
    """Has any run from the top of `run`'s tree down to `run` itself been asked to stop (or ended)? Read with
    their rows locked (shared), top first, for the rest of the caller's transaction: the order a Stop locks a
    tree in (the top run, then level by level below it), so neither waits on the other in a circle. Called
    first in the transaction that starts a member: a Stop that committed first is seen here, and one that comes
    later waits for the start to commit, and then finds the new member among the runs it stops."""
    path = [*reversed(run_ancestor_ids(run)), run.pk]
    table = AgentRun._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT "cancel_requested" OR "finished_at" IS NOT NULL FROM "{table}" '  # noqa: S608 (the model's table)
            'WHERE "id" = ANY(%s) ORDER BY "depth" FOR SHARE', [path],
        )
        return any(stopped for (stopped,) in cursor.fetchall())


def run_child_start(*, parent: AgentRun, spec: str, task: str, sharing: int = 1,
                    asked_in: AgentStep | None = None, hands_over: bool = False) -> AgentRun:
    """A queued child of `parent` under the member `spec`, asked to do `task`: the same person, chat and
    session as its parent (its tool calls go through the site's middleware with that session, and it ends
    when the session does), its member's own model, instructions, tools and profile, and limits reserved
    from what its parent has left (assistant/society/budget.py), `sharing` delegations of one answer
    sharing it; `asked_in` is the parent's step that asks it. `hands_over`: its answer is to be its parent's
    reply (a handoff, assistant/turn/handoff.py); it then `answers_person` when its parent does (a top run, or a
    member handing over in turn). Raises DelegationRefused, creating nothing, when the member cannot be asked
    from here."""
    depth = parent.depth + 1
    if depth > int(assistant_settings.MAX_DELEGATION_DEPTH):
        raise DelegationRefused(f"The request is already {parent.depth} members deep, the most it may go; "
                                "do this yourself or tell the person.")
    path = run_path(parent)
    if spec in path:
        raise DelegationRefused(f"The member “{spec}” is already working on this request above you "
                                f"({' → '.join(path)}); it cannot be asked again from here.")
    config = run_config(spec=spec)
    try:
        config.update(reserve(parent, config, sharing=sharing))
    except BudgetExhausted as spent:
        raise DelegationRefused(spent.message) from spent
    member_settings = channel_policy(parent.channel).member_settings
    if member_settings is not None:
        # What its asker's channel passes on (a member asked in a replay replays too, from its recordings).
        config.update(member_settings(parent.config or {}, spec, task))
    config["asked_by"] = parent.spec  # its profile entry says who asked it, read from here when it ends
    # Its trace goes on from the asking run's (assistant/tracing/): the worker that takes it may be another.
    config["trace"] = handoff(f"ask {spec}", {"gen_ai.agent.name": spec})
    if ALLOWANCE in (parent.config or {}) or (parent.config or {}).get(ALLOWANCE_TREE):
        config[ALLOWANCE_TREE] = True  # its tree holds part of the person's allowance: it reads it again too
    if (parent.config or {}).get("attachments"):
        # The files the person sent with the request go to every member working on it, with its task.
        config["attachments"] = list(parent.config["attachments"])
    if hands_over:
        config["hands_over"] = True
        config["answers_person"] = parent.parent_id is None or bool((parent.config or {}).get("answers_person"))
    child = run_open(
        owner_id=parent.owner_id, chat_id=parent.chat_id, spec=spec, parent=parent, channel=parent.channel,
        root_id=parent.root_id or parent.pk, depth=depth, task=task, asked_in=asked_in, config=config,
        # What its asker read, it has read too: its task may carry it (assistant/turn/confirmation.py).
        others_text=list(parent.others_text or []),
        session_digest=parent.session_digest, session_sealed=parent.session_sealed,
        client_address=parent.client_address, client_origin=parent.client_origin,
    )
    child.save(force_insert=True)
    return child


def run_routed_config(run: AgentRun, spec: str, *, reason: str) -> dict[str, Any]:
    """The settings of `run` once a plain request routes it to its member `spec` (assistant/society/routing.py):
    the member's own (model, instructions, permission profile, what it hands over and routes), limits within both
    the member's and the run's (a member asked never has more than its asker left), and what the run was sent with
    (its page, its place in a tree, its channel's settings); `routed` says from which spec, and why."""
    kept = dict(run.config or {})
    own = run_config(spec=spec)
    within = {limit: min(float(own[limit]), float(kept[limit])) for limit in (*SHARED_LIMITS, WALL)
              if limit in own and limit in kept}
    return {**kept, **own, **{limit: _as_setting(value) for limit, value in within.items()},
            "routed": {"from": run.spec, "reason": reason}}


def run_descendants(run: AgentRun, *, active: bool = False) -> list[AgentRun]:
    """The runs below `run`, level by level (its children first), locked for the caller's transaction;
    only the active ones when `active`. One query per level: a tree is at most MAX_DELEGATION_DEPTH deep."""
    found: list[AgentRun] = []
    level = [run.pk]
    while level:
        rows = AgentRun.objects.select_for_update().filter(parent_id__in=level).order_by("pk")
        children = list(rows)
        level = [child.pk for child in children]
        found.extend(child for child in children if child.is_active or not active)
    return found


def run_setting(run: AgentRun, key: str) -> Any:
    """A setting as the run keeps it (see `run_config`), or the default for a key the run predates."""
    return run.setting(key)


class AskingTool(Protocol):
    """What a question's card says of the tool it would run."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def destructive(self) -> bool: ...

    @property
    def parameters(self) -> dict[str, Any]: ...


def run_question_announce(run: AgentRun, step: AgentStep, tool: AskingTool) -> None:
    """Announce that `run` waits for the person's answer to `step`, a call of `tool` (`assistant.confirm`)."""
    publish_to_user(run.owner_id, run_event(
        event_names.CONFIRM, run, step=step_payload(step),
        # Its arguments' schema: the card's form of values (approve with changes) labels and bounds each from it.
        tool={"name": tool.name, "description": tool.description, "destructive": tool.destructive,
              "parameters": tool.parameters},
    ))


def run_await_person(run: AgentRun, *, holder: str, step: AgentStep, tool: AskingTool) -> bool:
    """Pause `run`, which the worker `holder` works on, for the person's answer to `step`: it waits as
    `awaiting_confirmation` and holds no worker, and the question is announced. False, changing nothing, when
    `holder` no longer holds it."""
    released = AgentRun.objects.filter(pk=run.pk, lease_owner=holder).update(
        status=AgentRun.Status.AWAITING_CONFIRMATION, lease_owner="", lease_expires_at=None
    )
    if not released:
        return False
    run.status, run.lease_owner, run.lease_expires_at = AgentRun.Status.AWAITING_CONFIRMATION, "", None
    run_question_announce(run, step, tool)
    return True


def run_await_members(run: AgentRun, *, holder: str) -> bool:
    """Pause `run`, which the worker `holder` works on, while any member it asked is still at work: it waits as
    `awaiting_members` and holds no worker, until the end of its last working member wakes it
    (`run_parent_wake`). Nothing is announced: the members' own events show the work going on. False,
    changing nothing, when no member is at work any more, when the person stopped the run, or when `holder`
    no longer holds it (the caller reads which)."""
    working = AgentRun.objects.filter(parent_id=OuterRef("pk"), status__in=AgentRun.ACTIVE_STATUSES)
    held = AgentRun.objects.filter(pk=run.pk, lease_owner=holder)
    # One statement: the run's row is locked by it before a member's wake can look at it (see
    # assistant/turn/handoff.py), and a Stop that committed first keeps it from pausing.
    if held.filter(cancel_requested=False).filter(Exists(working)).update(
        status=AgentRun.Status.AWAITING_MEMBERS, lease_owner="", lease_expires_at=None
    ):
        run.status, run.lease_owner, run.lease_expires_at = AgentRun.Status.AWAITING_MEMBERS, "", None
        return True
    return False


def run_resume_answered(run: AgentRun, answered: AgentStep) -> None:
    """The person answered `answered`, the question `run` (locked by the caller) waits on: it goes back on the
    queue with its working time running again — and that of the runs above it, which wait for it — and the
    answered step is announced. The caller enqueues it."""
    run.status = AgentRun.Status.QUEUED
    run.clock_started_at = timezone.now()
    run.save(update_fields=["status", "clock_started_at"])
    if run.parent_id is not None:
        # Time spent waiting for the person is nobody's working time: the runs above this member (waiting
        # for it) start their clocks again too.
        AgentRun.objects.filter(pk__in=run_ancestor_ids(run)).update(clock_started_at=run.clock_started_at)
    step_announce(run, answered)


def run_resume_by_client(run_id: int) -> bool:
    """A call of the person's own agent that waited for the person is taken up by the agent calling again, which
    runs it now: running, its working time counting again. False when the run no longer waits."""
    return bool(AgentRun.objects.filter(pk=run_id, status=AgentRun.Status.AWAITING_CONFIRMATION).update(
        status=AgentRun.Status.RUNNING, clock_started_at=timezone.now()))


def run_parent_wake(run: AgentRun) -> bool:
    """`run` (a member's run) has ended: put the run that asked it back on the queue, if it waits for its
    members and none of them is still at work. Returns whether it was woken; the caller works on it or
    enqueues it. Safe to call any number of times, from anywhere (see assistant/turn/handoff.py for the
    race with the parent pausing)."""
    if run.parent_id is None:
        return False
    working = AgentRun.objects.filter(parent_id=OuterRef("pk"), status__in=AgentRun.ACTIVE_STATUSES)
    return bool(AgentRun.objects.filter(pk=run.parent_id, status=AgentRun.Status.AWAITING_MEMBERS)
                .exclude(Exists(working)).update(status=AgentRun.Status.QUEUED))


def run_parents_wake_due() -> list[int]:
    """Put back on the queue the runs waiting for members none of which is still at work (their wake was lost
    with a worker, or a member was ended by the sweeper), and return them: the sweeper's to enqueue. Normally
    none."""
    working = AgentRun.objects.filter(parent_id=OuterRef("pk"), status__in=AgentRun.ACTIVE_STATUSES)
    waiting = AgentRun.objects.filter(status=AgentRun.Status.AWAITING_MEMBERS).exclude(Exists(working))
    due = list(waiting.values_list("pk", flat=True)[:100])
    return [pk for pk in due if AgentRun.objects.filter(pk=pk, status=AgentRun.Status.AWAITING_MEMBERS)
            .exclude(Exists(working)).update(status=AgentRun.Status.QUEUED)]


def step_announce(run: AgentRun, step: AgentStep) -> None:
    """Tell the person's sockets about `step` of `run` as it now stands (`assistant.step`), once the write that
    made it so commits: every write of a step is followed by this, whoever writes it."""
    publish_to_user(run.owner_id, run_event(event_names.STEP, run, step=step_payload(step)))


def step_outcome_set(step: AgentStep, outcome: dict[str, Any], duration_ms: int | None = None) -> None:
    """Put a tool step's outcome (what the executor answered, or why nothing ran) on its row, not saved yet:
    finished, whether it took effect (None: the outcome is unknown), and why not. The worker's journal and the
    channels that run their own calls (assistant/mcp/agent_calls.py) end a step this one way."""
    step.state = AgentStep.State.FINISHED
    step.result = outcome
    took_effect = outcome.get("took_effect")
    step.took_effect = None if took_effect is None else bool(took_effect)
    step.reason = "" if step.took_effect else str(outcome.get("reason", ""))[:2000]
    if duration_ms is not None:
        step.duration_ms = duration_ms


def step_finish(run: AgentRun, step: AgentStep, outcome: dict[str, Any], *, duration_ms: int | None = None,
                also_saved: Sequence[str] = ()) -> None:
    """End a tool step of a run no worker holds (a call of the person's own agent): its outcome saved, with the
    fields named in `also_saved` the caller set, and announced."""
    step_outcome_set(step, outcome, duration_ms)
    timed = ["duration_ms"] if duration_ms is not None else []
    step.save(update_fields=["state", "result", "took_effect", "reason", *timed, *also_saved])
    step_announce(run, step)


_Stop = AgentRun.StopReason

# A tool step whose run ended before it ran: what happened to it, in words, by why the run ended and what
# the person had answered (True approved, False asked and not answered, None never asked).
_NOT_RUN_REASONS: dict[tuple[str, bool | None], str] = {
    (_Stop.CANCELLED, None): "You stopped the run before this ran; the action was not taken.",
    (_Stop.CANCELLED, False): "You stopped the run instead of answering; the action was not taken.",
    (_Stop.CANCELLED, True): "You approved it, then stopped the run before it ran; the action was not taken.",
    (_Stop.SESSION_ENDED, None): "You were signed out before this ran; the action was not taken.",
    (_Stop.SESSION_ENDED, False): "You were signed out before answering; the action was not taken.",
    (_Stop.SESSION_ENDED, True): "You approved it, but were signed out before it ran; the action was not taken.",
    (_Stop.SUPERSEDED, False): "You sent a new message instead of answering; the action was not taken.",
    (_Stop.EXPIRED, False): "Nobody answered in time, so your agent's call was not taken.",
    (_Stop.EXPIRED, True): "You approved it, but your agent did not call it again in time; "
                           "the action was not taken.",
    (_Stop.TOKEN_REVOKED, False): "The access token was revoked before you answered; the action was not taken.",
    (_Stop.TOKEN_REVOKED, True): "You approved it, but the access token was revoked before your agent called "
                                 "again; the action was not taken.",
}


def not_run_outcome(*, stop_reason: str, approved: bool | None) -> dict[str, Any]:
    """The outcome of a tool step whose run ended before it ran (see AgentStep.NOT_RUN). `approved`: the
    person's answer to it, False when asked and not answered, None when it never asked."""
    reason = _NOT_RUN_REASONS.get((stop_reason, approved)) or (
        f"The run ended ({stop_reason or 'stopped'}) before this ran; the action was not taken."
    )
    return {"status": AgentStep.NOT_RUN, "took_effect": False, "reason": reason}


def _close_unrun_steps(run: AgentRun, steps: list[AgentStep], stop_reason: str) -> list[AgentStep]:
    """Finish every step of the ending run that still waits: one the person was asked about and never
    answered, or approved and the run never got to. Its record then says what happened — not taken, and
    why — and keeps the person's answer as it was: `confirmation` stays "" when they did not answer (a
    Stop, a sign-out or a new message is not a "no"), "approved" when they did. A member it asked that had
    not answered yet is stopped with it: its own run says what it did. Saved by the caller."""
    closed = []
    for step in steps:
        if step.kind != AgentStep.Kind.TOOL_CALL:
            continue
        asked = step.result or {}
        if step.state == AgentStep.State.STARTED and asked.get("child_run_id"):
            outcome = _member_evidence(asked, stop_reason)
        elif step.state == AgentStep.State.AWAITING_CONFIRMATION:
            outcome = not_run_outcome(
                stop_reason=stop_reason, approved=step.confirmation == AgentStep.Confirmation.APPROVED
            )
        else:
            continue
        # A member that answered just before its asker was stopped leaves an outcome without a reason: the
        # step then says nothing more than its answer does.
        step.state, step.took_effect, step.reason, step.result = (
            AgentStep.State.FINISHED, outcome["took_effect"], outcome.get("reason", ""), outcome
        )
        closed.append(step)
    return closed


def _member_evidence(asked: dict[str, Any], stop_reason: str) -> dict[str, Any]:
    """What the member a delegation step asked did, for the step of a run that ends before hearing back: its
    own outcome when it answered (it may have answered, and acted, just before its asker was stopped); else it
    was stopped with its asker, and the step says what it had done by then — what took effect did."""
    child = AgentRun.objects.filter(pk=asked["child_run_id"]).first()
    if child is not None and child.status == AgentRun.Status.SUCCEEDED:
        return member_outcome(child)
    effects = subtree_effects(child) if child is not None else []
    done = [step.tool_name for step in effects if step.took_effect]
    unknown = child is None or child.is_active or any(step.took_effect is None for step in effects)
    reason = (f"The run ended ({stop_reason or 'stopped'}) before the member “{asked.get('member', '')}” "
              "answered; " + (f"by then it had done: {', '.join(done)}." if done else
                              "its own run shows what it did." if unknown else "it had done nothing."))
    return {**asked, "status": AgentStep.MEMBER_STOPPED, "took_effect": True if done else None if unknown else False,
            "reason": reason}


def run_finish(
    *, run: AgentRun, status: str, stop_reason: str = "", error: str = "", reply: str = "",
    steps: list[AgentStep] | None = None, holder: str | None = None, with_rows: Sequence[Model] = (),
    answered_by: int | None = None,
) -> AgentRun:
    """Close a run with its final status, file it in its owner's profile and announce it. Counts and
    tokens are totalled from its steps (pass them when already loaded).

    A worker passes its `holder`: the run is then closed only while that worker still holds its lease,
    in the same statement, and `LeaseLost` is raised, with nothing changed, when it does not.

    `with_rows` (a worker's, with its `holder`) are inserted in the statement that closes the run: its last
    step and its reply go in with the end, or not at all (steps among them are announced with it).

    The profile entry is written in the same transaction as the end (the caller's, or one of its own):
    a run counts exactly once however it ends, whatever dies when (see assistant/runs/profile.py).

    `answered_by`: the member's run whose answer is the reply (a handoff, assistant/turn/handoff.py)."""
    with transaction.atomic(savepoint=False):
        run = _run_close(run=run, status=status, stop_reason=stop_reason, error=error, reply=reply, steps=steps,
                         holder=holder, with_rows=with_rows, answered_by=answered_by)
    if status == AgentRun.Status.CANCELLED:
        publish_to_user(run.owner_id, run_event(event_names.CANCELLED, run, run=run_payload(run)))
    elif status != AgentRun.Status.SUCCEEDED:
        publish_to_user(run.owner_id, run_event(event_names.REPLY_FAILED, run, error=error, run=run_payload(run)))
    return run


def _run_close(
    *, run: AgentRun, status: str, stop_reason: str, error: str, reply: str, steps: list[AgentStep] | None,
    holder: str | None, with_rows: Sequence[Model] = (), answered_by: int | None = None,
) -> AgentRun:
    now = timezone.now()
    steps = list(run.steps.all()) if steps is None else steps
    unrun = _close_unrun_steps(run, steps, stop_reason) if status != AgentRun.Status.SUCCEEDED else []
    run.status, run.stop_reason, run.error, run.reply = status, stop_reason, error, reply
    for name, value in step_counts(steps).items():
        setattr(run, name, value)
    run.total_tokens = run.prompt_tokens + run.completion_tokens
    run.finished_at = now
    run.duration_ms = int((now - (run.started_at or run.created_at)).total_seconds() * 1000)
    run.lease_owner, run.lease_expires_at = "", None
    # An ended run acts for nobody: its sealed session key goes with the end (the digest opens nothing).
    run.session_sealed = b""
    run.intent = run_intent(steps)
    # Set with the end, in its one statement; the entry follows in the same transaction.
    run.profile_recorded_at = now
    fields = [
        "status", "stop_reason", "error", "reply", "model_calls", "tool_calls", "tool_errors", "prompt_tokens",
        "completion_tokens", "total_tokens", "cost", "finished_at", "duration_ms", "lease_owner", "lease_expires_at",
        "intent", "profile_recorded_at", "session_sealed",
    ]
    if answered_by is not None:
        run.answered_by_id = answered_by
        fields.append("answered_by")
    if holder is None:
        assert not with_rows, "rows go in with the end only for the worker that holds the run"
        run.save(update_fields=fields)
    else:
        # A reply never wins over a Stop the person sent first: the check is part of the closing statement,
        # so a cancel that committed a moment before the end is never left behind, whichever step saw it.
        closed = write_fenced(inserts=with_rows, updates=[(run, fields)], run_id=run.pk, holder=holder,
                              unless_cancelled=status == AgentRun.Status.SUCCEEDED)
        if not closed.written:
            if closed.cancel_requested:
                raise CancelledBeforeEnd(f"run {run.pk} was stopped by its person before it could end")
            raise LeaseLost(f"run {run.pk} is no longer held by {holder}")
        for row in with_rows:  # announced in the order written, before what the end changes
            if isinstance(row, AgentStep):
                step_announce(run, row)
    for step in unrun:
        step.save(update_fields=["state", "took_effect", "reason", "result"])
        step_announce(run, step)
    if channel_policy(run.channel).filed_in_profile:  # not an eval's replay, staff's experiment, say
        run_profile_record(run, steps)
    elif run.parent_id is None:
        transaction.on_commit(functools.partial(run_ended.send, sender=AgentRun, run_id=run.pk), robust=True)
    run_plan_close(run, steps)
    if status != AgentRun.Status.SUCCEEDED:
        _members_stop(run, status=status, stop_reason=stop_reason, error=error)
        # A member whose asker ended first never succeeds (its answer's write reads the Stop its asker's end
        # sent it): only a member's other endings may have an asking step to correct.
        _asking_step_correct(run)
    return run


def _asking_step_correct(member: AgentRun) -> None:
    """A member that ends after the run that asked it ended (stopped with its tree while it still worked): the
    asking step said what the member had done by then, which an action still finishing may not have shown; it now
    says what the member did in the end. Inside the transaction that ends the member, so both say the same."""
    if member.asked_in_id is None:
        return
    step = AgentStep.objects.select_for_update().filter(
        pk=member.asked_in_id, state=AgentStep.State.FINISHED, result__status=AgentStep.MEMBER_STOPPED).first()
    if step is None:
        return
    asker = AgentRun.objects.filter(pk=step.run_id).only("pk", "owner_id", "chat_id", "parent_id", "root_id", "spec",
                                                          "asked_in_id", "channel", "stop_reason").first()
    if asker is None:
        return
    asked = {key: value for key, value in (step.result or {}).items() if key in ("member", "child_run_id")}
    outcome = _member_evidence(asked, asker.stop_reason)
    if (outcome.get("status"), outcome.get("took_effect")) == ((step.result or {}).get("status"), step.took_effect):
        return
    step.took_effect, step.reason, step.result = outcome["took_effect"], outcome.get("reason", ""), outcome
    step.save(update_fields=["took_effect", "reason", "result"])
    step_announce(asker, step)


def _members_stop(run: AgentRun, *, status: str, stop_reason: str, error: str) -> None:
    """A run that ended without its answer takes the members still working for it along: no member works
    for a request that is over. A waiting or queued one ends as its asker did; a working one is asked to
    stop, and stops at its next step saying why its top run ended. Those a Stop or a sign-out reaches
    themselves have ended before their asker does (members first), and are not touched again."""
    for below in reversed(run_descendants(run, active=True)):
        if below.status == AgentRun.Status.RUNNING:
            AgentRun.objects.filter(pk=below.pk).update(cancel_requested=True)
            transaction.on_commit(functools.partial(request_cancel, below.pk))
        else:
            _run_close(run=below, status=status, stop_reason=stop_reason, error=error, reply="", steps=None,
                       holder=None)
            publish_to_user(below.owner_id, run_event(event_names.CANCELLED if status == AgentRun.Status.CANCELLED
                                                      else event_names.REPLY_FAILED, below, error=error,
                                                      run=run_payload(below)))


def chat_activity_record(*, chat_id: int, at: datetime) -> int | None:
    """A reply written at `at` is its chat's newest activity (the order of the person's list of chats). Returns the
    chat's leaf (the end of the branch its person reads, once they branched: see assistant/live/threads.py).

    Called in the transaction that ends the run, before the run's row is touched: a send or a delete locks
    the chat's row, then the run's, and a worker that held the run's row while it waited here for the
    chat's would close a circle with them."""
    table = AgentChat._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f'UPDATE "{table}" SET "last_activity_at" = GREATEST("last_activity_at", %s) '  # noqa: S608
                       'WHERE "id" = %s RETURNING "leaf_id"', [at, chat_id])
        row = cursor.fetchone()
    return row[0] if row is not None else None
