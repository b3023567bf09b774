"""One call of the person's own agent, as a run: recorded, mediated and approved like the panel's steps.

Each `tools/call` is a run of its own (channel `mcp`) in the chat of the token that made it, with one
tool step: the same row a panel turn writes, so the person's chat list, the admin's timeline, the
dashboard and the spec's profile show it with no code of their own. What runs is `execute_tool`, the
panel's executor: the site's middleware, the view's decorators and scoping, the resolved-view check.

A call the panel would pause on is not run without the person's yes. Its run waits (status
`awaiting_confirmation`) with the step showing the approval sentence, and the yes comes one of two ways:

- the client answers an elicitation whose question is that sentence; the answer names the step it answers
  (its key), and is taken once: a replayed or stale answer finds nothing waiting and is refused;
- the person approves the card in their panel; the agent's next call of the same tool with the same
  arguments, with the same token, runs it once.

Either way the step is taken up by one conditional update, so two retries never run it twice.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django_mcpz.server import ToolError

from assistant.conf import assistant_settings
from assistant.live.cards import step_card
from assistant.mcp.agent_calls import agent_call_declined, agent_call_reply
from assistant.mcp.channel import MCP
from assistant.mcp.conf import mcp_settings
from assistant.mcp.models import AccessToken
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.runs import lifecycle
from assistant.runs.lifecycle import (
    run_config,
    run_finish,
    run_question_announce,
    run_resume_by_client,
    run_sent_announce,
    step_announce,
    step_finish,
)
from assistant.runs.model_output import storable_json
from assistant.runs.rows import write_together
from assistant.tools import Tool
from assistant.tools.describe import describe_call
from assistant.tools.executor import execute_tool
from assistant.tools.outcome import ToolOutcome
from assistant.tools.provenance import merge
from assistant.tracing import span
from assistant.tracing.conventions import tool_span

#: What a run's `model` says for a call the person's own agent made: no model of this site took part.
CLIENT_MODEL = "mcp-client"
#: The approval step waits with this reason, as a panel step does.
WAITING = "Waiting for your approval."


class CallRefused(ToolError):
    """The call is not run now; `message` says why, for the client's model (an in-band tool error, which is
    what the server answers when this reaches it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Caller:
    """Who calls: the person, the token they call with, and the profile it narrows their spec to."""

    user: Any
    token: AccessToken

    @property
    def profile(self) -> str | None:
        return "restricted" if self.token.read_only else None


def call_digest(name: str, arguments: dict[str, Any]) -> str:
    """The same tool with the same arguments, whatever their order: what a retry is matched by."""
    encoded = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()


def _too_many_calls(limit: int) -> CallRefused:
    return CallRefused(f"This token made {limit} calls in the last minute, the most it may; wait a minute and try "
                       "again. Nothing was done.")


def rate_check(caller: Caller, *, name: str, arguments: dict[str, Any], writes: bool) -> None:
    """The token's calls per minute, and a write repeated identically past the loop's limit: refused,
    with nothing recorded, before anything else happens. It sees the runs committed when it asks; `run_open`
    counts again in the statement that writes the run, which is exact however many calls come at once."""
    since = timezone.now() - timedelta(minutes=1)
    recent = AgentRun.objects.filter(client_token_id=caller.token.pk, created_at__gte=since)
    # One statement: the token's calls, and (for a write) how many of them were this very call.
    same_call = Q(config__mcp__call=call_digest(name, arguments))
    counted = recent.aggregate(calls=Count("pk"), **({"same": Count("pk", filter=same_call)} if writes else {}))
    limit = int(mcp_settings.MCP_CALLS_PER_MINUTE)
    if counted["calls"] >= limit:
        raise _too_many_calls(limit)
    same = int(assistant_settings.MAX_IDENTICAL_TOOL_CALLS)
    if writes and counted["same"] >= same:
        raise CallRefused(f"This exact call was made {same} times in the last minute; it is refused so that "
                          "a loop does no harm. Nothing was done.")


def _token_calls_held(caller: Caller) -> None:
    """Hold the token's other calls from making their runs until this transaction ends: a transaction-scoped
    advisory lock, keyed by the token (nothing to release, and no row that anything else waits on)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                       [f"assistant.mcp_calls:{caller.token.pk}"])


@functools.cache
def _within_limits_sql(writes: bool) -> str:
    """A row while the token's runs since the time given are fewer than its calls' limit, and (for a write)
    those of this very call fewer than the identical calls' limit: the guard of the run's insert."""
    table = AgentRun._meta.db_table
    recent = f'SELECT 1 FROM "{table}" WHERE "client_token_id" = %s AND "created_at" >= %s'  # noqa: S608
    sql = f'SELECT true AS "answer" WHERE (SELECT count(*) FROM ({recent} LIMIT %s) AS "calls") < %s'  # noqa: S608
    if writes:
        sql += (f' AND (SELECT count(*) FROM ({recent} AND "config" -> \'mcp\' ->> \'call\' = %s LIMIT %s) '  # noqa: S608
                'AS "same") < %s')
    return sql


def token_chat(caller: Caller) -> AgentChat:
    """The chat the token's calls are recorded in: one per token, made with its first call (and again if
    the person deleted it)."""
    chats = AgentChat.objects.for_user(caller.user)
    if caller.token.chat_id:  # the usual case: the chat exists, and no lock is needed to find it
        found = chats.filter(pk=caller.token.chat_id).first()
        if found is not None:
            return found
    # Made under the token's lock, so two first calls at once make one chat.
    token = AccessToken.objects.select_for_update().get(pk=caller.token.pk)
    chat = chats.filter(pk=token.chat_id).first() if token.chat_id else None
    if chat is None:
        chat = AgentChat.objects.create(owner=caller.user, spec=token.spec, channel=MCP.value,
                                        title=f"{token.name} (your agent)"[:200])
        AccessToken.objects.filter(pk=token.pk).update(chat=chat)
    return chat


def _asked(tool: Tool, caller: Caller) -> str:
    """The chat's line for the call: who asked, for what."""
    return f"Your agent “{caller.token.name}” called {tool.name}."


def held_by_containment(caller: Caller, tool: Tool) -> list[dict[str, Any]]:
    """For a token that asked for containment: whose text its calls returned within the window, when `tool`
    writes (a write then waits for the person, as in the panel); [] when nothing holds it."""
    token = caller.token
    if not token.containment or tool.kind == "read" or token.others_text_until is None:
        return []
    return list(token.others_text or []) if token.others_text_until > timezone.now() else []


def containment_note(caller: Caller, outcome: ToolOutcome) -> None:
    """A call of a token with containment returned someone else's text: its writes wait for the person until
    MCP_CONTAINMENT_SECONDS from now (what it returned before, within the window, still counts)."""
    token = caller.token
    if not token.containment or not outcome.others_text:
        return
    now = timezone.now()
    earlier = token.others_text if token.others_text_until and token.others_text_until > now else []
    token.others_text = merge(earlier, outcome.others_text)
    token.others_text_until = now + timedelta(seconds=float(mcp_settings.MCP_CONTAINMENT_SECONDS))
    AccessToken.objects.filter(pk=token.pk).update(others_text=token.others_text,
                                                   others_text_until=token.others_text_until)


def run_open(caller: Caller, tool: Tool, arguments: dict[str, Any], *, summary: str = "",
             containment: dict[str, Any] | None = None) -> tuple[AgentRun, AgentStep]:
    """The call's run and its one tool step, both rows before anything runs; waiting for the person when
    `summary` (the approval sentence) is given, else working. `containment`: why it waits (the token's
    containment held it), kept on the step and the run labelled with whose text it was."""
    now = timezone.now()
    config = run_config(spec=caller.token.spec)
    config["model"] = CLIENT_MODEL
    if caller.token.read_only:
        config["permission_profile"] = "restricted"
    config["mcp"] = {"call": call_digest(tool.name, arguments), "token": caller.token.pk}
    waits = bool(summary)
    stored, _problem = storable_json(arguments)
    writes = tool.kind != "read"
    calls, same = int(mcp_settings.MCP_CALLS_PER_MINUTE), int(assistant_settings.MAX_IDENTICAL_TOOL_CALLS)
    since = now - timedelta(minutes=1)
    limits = [caller.token.pk, since, calls, calls]
    if writes:
        limits += [caller.token.pk, since, config["mcp"]["call"], same, same]
    with transaction.atomic():
        # The token's calls make their runs one at a time, each counting (in the statement that writes its
        # run, begun after this) every run the ones before it made: the limits hold however many come at
        # once (`rate_check`, before, refuses early but sees only what was committed when it asked).
        _token_calls_held(caller)
        chat = token_chat(caller)
        run = lifecycle.run_open(
            owner=caller.user, chat=chat, spec=caller.token.spec, model=CLIENT_MODEL, config=config,
            others_text=(containment or {}).get("others_text") or [],
            channel=MCP.value, client_name=caller.token.name, client_token_id=caller.token.pk,
            begun=now, asks_first=waits,
        )
        message = AgentMessage(chat=chat, owner=caller.user, role=AgentMessage.Role.USER,
                               content=_asked(tool, caller), run=run)
        chat.last_activity_at = message.created_at
        # The run, its message and the chat's newest activity: one statement, written only within the limits.
        written = write_together(guard=_within_limits_sql(writes), guard_params=limits, inserts=[run, message],
                                 updates=[(chat, ["last_activity_at"])])
        if written.answer is None:
            # Over a limit: which one, in words (counted now, so as the guard counted); nothing was written.
            rate_check(caller, name=tool.name, arguments=arguments, writes=writes)
            raise _too_many_calls(calls)
        step = AgentStep.objects.create(
            run=run, seq=1, kind=AgentStep.Kind.TOOL_CALL, tool_name=tool.name, call_id=f"mcp-{run.pk}",
            arguments=stored,
            state=AgentStep.State.AWAITING_CONFIRMATION if waits else AgentStep.State.STARTED,
            reason=WAITING if waits else "", summary=summary, containment=containment,
        )
        run_sent_announce(run, chat, message)
        step_announce(run, step)
        if waits:
            run_question_announce(run, step, tool)
    return run, step


def approval_summary(caller: Caller, tool: Tool, arguments: dict[str, Any]) -> str:
    """The approval card's sentence, looked up as the person: the same words the panel shows."""
    return describe_call(caller.user, tool, arguments)


def waiting_call(caller: Caller, tool: Tool, arguments: dict[str, Any]) -> tuple[AgentRun, AgentStep] | None:
    """This token's run for this very call that still waits (for the person's answer, or approved and
    waiting for the agent to call again), if one was asked within MCP_APPROVAL_SECONDS; older ones are
    ended as not answered, so a call asks afresh."""
    horizon = timezone.now() - timedelta(seconds=float(mcp_settings.MCP_APPROVAL_SECONDS))
    runs = AgentRun.objects.filter(client_token_id=caller.token.pk, owner=caller.user, chat__deleted_at__isnull=True,
                                   status=AgentRun.Status.AWAITING_CONFIRMATION,
                                   config__mcp__call=call_digest(tool.name, arguments)).order_by("-created_at")
    found = None
    for run in runs:
        if run.created_at < horizon or found is not None:
            run_expire(run)
            continue
        step = run.steps.filter(state=AgentStep.State.AWAITING_CONFIRMATION).first()
        if step is not None:
            found = (run, step)
    return found


def run_expire(run: AgentRun) -> None:
    """An approval nobody took up in time: its run ends, its action not taken."""
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().filter(pk=run.pk, status=AgentRun.Status.AWAITING_CONFIRMATION)
        waiting = locked.first()
        if waiting is not None:
            run_finish(run=waiting, status=AgentRun.Status.CANCELLED, stop_reason=AgentRun.StopReason.EXPIRED,
                       error="Your agent did not call it again in time; the action was not taken.")


def step_take(step: AgentStep, *, answered: bool) -> bool:
    """Take the waiting step up to run it, once: `answered` (the client's elicitation said yes) takes a
    step the person has not answered in the panel, or has approved there; otherwise (a retry) only one
    they approved. False when it is no longer waiting: another call took it, or it was declined."""
    allowed = ["", AgentStep.Confirmation.APPROVED] if answered else [AgentStep.Confirmation.APPROVED]
    with transaction.atomic():
        taken = AgentStep.objects.filter(pk=step.pk, state=AgentStep.State.AWAITING_CONFIRMATION,
                                         confirmation__in=allowed).update(
            state=AgentStep.State.STARTED, confirmation=AgentStep.Confirmation.APPROVED, reason="Approved; running.")
        if taken:
            run_resume_by_client(step.run_id)
    if taken:
        step.refresh_from_db()
    return bool(taken)


def step_decline(step: AgentStep) -> bool:
    """The person said no through the client: the step and its run end, nothing done. False when the step
    was no longer waiting for an answer (a replayed or stale answer)."""
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().filter(pk=step.run_id,
                                                          status=AgentRun.Status.AWAITING_CONFIRMATION).first()
        if run is None or not AgentStep.objects.filter(pk=step.pk, state=AgentStep.State.AWAITING_CONFIRMATION,
                                                       confirmation="").exists():
            return False
        agent_call_declined(run, step)
    return True


def outcome_words(outcome: ToolOutcome) -> str:
    """What the call came to, for the person reading their agent's chat: what the view said it did (its
    messages), how many rows a read gave, or why nothing was done."""
    data = outcome.data if isinstance(outcome.data, dict) else {}
    listed = data.get("messages")
    messages: list[Any] = listed if isinstance(listed, list) else []
    said = " ".join(str(item["text"]) for item in messages if isinstance(item, dict) and item.get("text"))
    if outcome.status == "done":
        return said or "Done."
    if outcome.status == "data":
        returned = data.get("returned")
        if isinstance(returned, int) and not isinstance(returned, bool):
            return f"Read {returned} result{'' if returned == 1 else 's'}."
        return "Read it."
    return f"Nothing was done: {outcome.reason or outcome.status}."


def step_run(caller: Caller, run: AgentRun, step: AgentStep) -> ToolOutcome:
    """Run the step (taken up, or new) as the person, through the panel's executor, and end its run."""
    started = time.monotonic()
    # What runs is the step's own record: exactly what the person saw and, if asked, approved.
    name, attributes = tool_span(name=step.tool_name, call_id=step.call_id, arguments=step.arguments)
    with span(name, attributes):  # inside the MCP request's own span, where the site traces its requests
        outcome = execute_tool(caller.user, step.tool_name, step.arguments, spec=caller.token.spec,
                               profile=caller.profile)
    answer = outcome.to_model()
    containment_note(caller, outcome)
    duration_ms = int((time.monotonic() - started) * 1000)
    # The tool's card of what it did, for the person's panel and staff, as in a panel run (assistant/live/cards.py).
    step.card = step_card(caller.user, step.tool_name, outcome)
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().get(pk=run.pk)
        step_finish(run, step, answer, duration_ms=duration_ms, also_saved=["card"] if step.card else ())
        if outcome.others_text:  # the run is labelled as a panel run is by what it read
            run.others_text = merge(run.others_text, outcome.others_text)
            run.save(update_fields=["others_text"])
        if run.is_active:  # the person may have stopped it meanwhile: the record keeps their Stop
            agent_call_reply(run, [step], outcome_words(outcome))
    return outcome
