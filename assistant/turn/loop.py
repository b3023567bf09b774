"""One turn in a worker (the seed's reason-act-observe loop): call the model with the tools the user may
use, run the tools it asks for as the user, feed the outcomes back, until it answers or a limit stops it.

Every model call and tool call is an AgentStep row written as it happens, and published after commit.
The steps are also the checkpoint: a run taken up again (after a crash, or after the user answered a
confirmation) rebuilds its conversation from them and goes on from the last completed step. A tool
step that started but never finished is not run again; the model is told its outcome is unknown.

The rules live beside this module: `journal` (fenced persistence and publishing: a worker that lost
the lease writes nothing), `limits`, `confirmation` (when a call waits for the person) and
`model_output` (what a model sends, made fit to store before anything is stored or run).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from assistant.access.authority import RunAuthority, SessionEnded
from assistant.channel_policies import RecordedAnswers, channel_policy
from assistant.conf import DEFAULTS
from assistant.embeddings import Embedder, EmbeddingError, get_embedder
from assistant.infra import event_names
from assistant.live.events import publish_to_user, publisher
from assistant.live.payloads import run_event
from assistant.llm import ChatModel, Message, ModelError, ModelResponse, ToolCall, get_model
from assistant.llm.prices import call_cost, price_of
from assistant.memory.store import memory_recall, memory_remember
from assistant.models import AgentMemory, AgentMessage, AgentRun, AgentStep
from assistant.plans.offer import PlanTool
from assistant.plans.record import run_plan
from assistant.runs import cancel_flags
from assistant.runs.lease import Heartbeat, LeaseLost
from assistant.runs.lifecycle import (
    STOPPED_BY_YOU,
    CancelledBeforeEnd,
    run_finish,
    run_parent_wake,
    run_path,
    run_routed_config,
    run_setting,
)
from assistant.runs.model_output import clean_text, fit_response, ids_in, recorded_calls
from assistant.society.members import Member, member
from assistant.society.offer import TASK_MAX_CHARS, DelegationTool, delegation_tools
from assistant.society.outcome import HandedOver
from assistant.society.routing import PlainIntent, Route, plain_intent_of, plain_route
from assistant.tools import Tool, tools_for
from assistant.tools.provenance import merge
from assistant.tracing import span
from assistant.tracing.conventions import agent_span, chat_answered, chat_span
from assistant.turn.calls import Next, PendingCall, calls_for
from assistant.turn.confirmation import read_in
from assistant.turn.context import (
    chat_history,
    conversation_window,
    earlier_notes,
    member_task_message,
    page_message,
    system_prompt,
)
from assistant.turn.handoff import handed_over_answer, is_waiting_on_member, members_used
from assistant.turn.journal import StepJournal
from assistant.turn.limits import Limits, StopRun
from registry.selectors import profile_summary

logger = logging.getLogger(__name__)

Status = AgentRun.Status
Kind = AgentStep.Kind
State = AgentStep.State

UNKNOWN_OUTCOME = (
    "The worker running this tool stopped before it finished, so whether it took effect is unknown. "
    "Check the current state with a read before doing it again."
)
# At most one Redis cancel check per this many seconds, at step boundaries and while a reply streams in:
# a cancel still lands within a fraction of a second, and a quick turn asks Redis once or twice, not at
# every step. The lease heartbeat reads the row's flag too, as the backstop.
CANCEL_CHECK_SECONDS = 0.2


__all__ = ["UNKNOWN_OUTCOME", "LeaseLost", "QuestionEmbedding", "StopRun", "Turn", "run_turn"]


_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None


def _embedding_pool() -> ThreadPoolExecutor:
    # One per process: a forked pool process does not inherit its parent's threads.
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool, _pool_pid = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assistant-embed"), os.getpid()
    return _pool


#: The questions this process embedded last: a run its members woke is taken up again here, right after
#: them, and asks for its question's embedding again (for recall, then to remember the exchange).
RECENT_VECTORS = 32
_recent_vectors: dict[tuple[str, str], list[float]] = {}
_recent_lock = threading.Lock()


class QuestionEmbedding:
    """The embedding of what the run was asked, computed in a background thread while the turn claims
    the run and loads its context (NumPy and the tokenizer release the interpreter lock), then used for
    recall and again to file the exchange away."""

    def __init__(self, text: str, embedder_spec: str) -> None:
        self.text, self.embedder_spec = text, embedder_spec
        self.embedder: Embedder | None = None
        self._error: EmbeddingError | None = None
        self._future: Future[list[list[float]]] | None = None
        self._vector: list[float] | None = _recent_vectors.get((embedder_spec, text))
        try:
            self.embedder = get_embedder(embedder_spec)
        except EmbeddingError as exc:
            self._error = exc
            return
        if text.strip() and self._vector is None:
            self._future = _embedding_pool().submit(self.embedder.embed, [text])

    @classmethod
    def from_message(cls, asked: dict[str, Any] | None) -> QuestionEmbedding | None:
        """Start on the question the task message carried, before the run is even read; None without one."""
        if not asked or not isinstance(asked.get("question"), str) or not isinstance(asked.get("embedder"), str):
            return None
        return cls(asked["question"], asked["embedder"])

    def is_for(self, text: str, embedder_spec: str) -> bool:
        return self.text == text and self.embedder_spec == embedder_spec

    def vector(self) -> list[float]:
        """Raises EmbeddingError when embedding failed."""
        if self._error is not None:
            raise self._error
        if self._vector is None:
            self._vector = self._future.result()[0] if self._future is not None else []
            if self._vector:
                with _recent_lock:  # a host's threaded worker pool turns in several threads of one process
                    _recent_vectors[(self.embedder_spec, self.text)] = self._vector
                    while len(_recent_vectors) > RECENT_VECTORS:
                        del _recent_vectors[next(iter(_recent_vectors))]
        return self._vector


class Turn:
    def __init__(self, run: AgentRun, heartbeat: Heartbeat, early: QuestionEmbedding | None = None, *,
                 work_on_member: Callable[[int], None] | None = None,
                 enqueue: Callable[[int], None] | None = None) -> None:
        self.run = run
        self.config = run.config or {}
        self.heartbeat = heartbeat
        # A member's run (one another run handed work to) is asked its task and nothing of the chat.
        self.is_member = run.parent_id is not None
        self.history = [] if self.is_member else chat_history(run)
        asked = self.history[-1] if self.history else None
        # The person the turn acts as: as the first check of their session loads them (see `execute`).
        self.user: Any = None
        text = run.task if self.is_member else (asked.content if asked is not None else "")
        embedder = str(run_setting(self.run, "EMBEDDER"))
        # A member remembers nothing (it answers the run that asked it): its task is embedded only to recall
        # what its spec remembers of this person from chats of its own, if there is anything.
        if self.is_member and not AgentMemory.objects.filter(owner_id=run.owner_id, spec=run.spec).exists():
            text = ""
        if early is None or not early.is_for(text, embedder):
            early = QuestionEmbedding(text, embedder)
        self.question = early
        # A run taken up for the first time has no steps yet: skip the query.
        steps: list[AgentStep] = list(run.steps.order_by("seq")) if run.attempts > 1 else []
        # The journal's writes read the run's cancel flag too, and raise the heartbeat's: one flag to check.
        self.journal = StepJournal(run, heartbeat.holder, steps, cancelled=heartbeat.cancelled,
                                   plan=run_plan(run) if steps else None)
        # A run taken up again may have asked members already: what they used counts in its limits.
        self.limits = Limits(run, members_used(steps))
        self.model: ChatModel | None = None
        self._streamed: list[str] = []
        self._to_person = False
        self.tools: dict[str, Tool] = {}
        # The members this run may hand work to (assistant/society/); how this worker works on the first one
        # it asks (at once, still holding this run), and hands the others of the same answer to other workers.
        self.delegations: dict[str, DelegationTool] = {}
        self.intent: PlainIntent | None = None  # what a plain request asks for, when it may be routed
        self.route: Route | None = None  # where it goes, when it is plainly one member's
        self.work_on_member, self.enqueue = work_on_member, enqueue
        # The planning tool, when the run's settings offer it (assistant/plans/).
        self.planner: PlanTool | None = None
        # The claim read the row's cancel flag, and the faster Redis flag is only ever set after that one:
        # the first Redis lookup can wait its turn, and a flag already set stops the run at its first boundary.
        self._next_cancel_check = time.monotonic() + CANCEL_CHECK_SECONDS
        if run.cancel_requested or getattr(run, "above_stopped", False):
            heartbeat.cancelled.set()
        # The session the message came with: the run acts with it, and only while it lasts.
        self.authority = RunAuthority(run)
        # Text by others read before any step: the page it was asked from, then the memories it recalls.
        page = self.config.get("page") if not self.is_member else None
        self._read_before: list[dict[str, Any]] = list((page or {}).get("others_text") or []) if isinstance(
            page, dict) else []
        # A run whose channel answers its calls from a recording (an eval's replay) never runs a view; the answers
        # it was given before a worker took it up again are its own steps'.
        recorded = channel_policy(run.channel).recorded_answers
        self.replay: RecordedAnswers | None = recorded(
            self.config, [(step.tool_name, step.arguments) for step in steps
                          if step.kind == Kind.TOOL_CALL and step.state == State.FINISHED],
        ) if recorded is not None else None
        # Every call of the model's answers goes through these, each behind what decides whether it runs.
        self.calls = calls_for(self, replay=self.replay)

    @property
    def steps(self) -> list[AgentStep]:
        return self.journal.steps

    @property
    def memory_spec(self) -> str:
        """The spec whose memories of this person the run recalls and adds to: the one the person talks to, also
        when the run was routed to a member (its memories are the chat's)."""
        return self.run.routed_from or self.run.spec

    @property
    def cancelled(self) -> bool:
        """Whether a write of the journal (or the heartbeat) found the person's Stop."""
        return self.heartbeat.cancelled.is_set()

    # --- entry -------------------------------------------------------------------------------

    def execute(self) -> None:
        try:
            self._boundary()
            # The run's person, as their session's check just loaded them (or, for a run with no session, as
            # the run names them).
            self.user = self.authority.person or self.run.owner
            self._equip()
            self._close_interrupted_steps()
            preamble: list[Message] | None = None
            while True:
                self._boundary()
                pending = self._pending_calls()
                if pending:
                    if not self._work_through(pending):
                        return  # paused for the person's answer, or for the members it asked
                    continue
                handed = handed_over_answer(self.steps)
                if handed is not None:
                    self.check_cancel()
                    self._succeed(handed.reply, handed)  # the member's answer is the reply: no model call
                    return
                if not self.steps and self.route is not None:
                    self._hand_over(self.route)  # decided as the members were ranked (`_delegation_tools`)
                    continue
                if preamble is None:  # not before it is needed: a run woken by its members may not get here
                    preamble = self._preamble()
                response = self._model_call(preamble + self._transcript())
                if not response.tool_calls:
                    self.check_cancel()  # the answer's own write may have found a Stop
                    self._succeed(response.text)
                    return
        except StopRun as stop:
            self._stop(stop)
        except LeaseLost:
            logger.warning("Run %s is no longer held by this worker (%s); it stops", self.run.pk, self.heartbeat.holder)
        except ModelError as exc:
            self._stop(StopRun(Status.FAILED, AgentRun.StopReason.MODEL_ERROR, str(exc)))
        except SessionEnded as ended:
            self._stop(StopRun(Status.CANCELLED, ended.stop_reason, ended.message))

    # --- checks ------------------------------------------------------------------------------

    def _boundary(self) -> None:
        """Between steps: does this worker still hold the run, has the user stopped it, is time up?
        Answered from the heartbeat's flags and a throttled Redis lookup, not a database query per step."""
        if not self.heartbeat.holds():
            raise LeaseLost()
        self.authority.check()
        self.check_cancel()
        self.limits.check_wall_time()

    def check_cancel(self) -> None:
        now = time.monotonic()
        if self.heartbeat.cancelled.is_set():
            raise self._stopped()
        if now >= self._next_cancel_check:
            self._next_cancel_check = now + CANCEL_CHECK_SECONDS
            if cancel_flags.cancel_requested(self.run.pk):
                raise self._stopped()

    def _stopped(self) -> StopRun:
        """Why this run was asked to stop: the person's Stop, or the end of the session it acts with (a
        sign-out stops every run of it, at every depth, and says so)."""
        try:
            self.authority.check(now=True)
        except SessionEnded as ended:
            return StopRun(Status.CANCELLED, ended.stop_reason, ended.message)
        return StopRun(Status.CANCELLED, AgentRun.StopReason.CANCELLED, STOPPED_BY_YOU)

    def _on_delta(self, delta: str) -> None:
        if not self.heartbeat.holds():
            raise LeaseLost()
        delta = clean_text(delta)
        self._streamed.append(delta)
        to_person = {"answers_person": True} if self._to_person else {}
        # A run a plain request made a member's writes as that member: the reply is named for it as it streams.
        named = {"routed_to": self.run.spec} if self.run.routed_from else {}
        publish_to_user(self.run.owner_id, run_event(event_names.TEXT_DELTA, self.run, delta=delta, **to_person,
                                                     **named))
        self.check_cancel()
        self.limits.check_wall_time()

    # --- steps -------------------------------------------------------------------------------

    def _notice(self, text: str) -> None:
        self.journal.notice(text)

    def others_text(self) -> list[dict[str, Any]]:
        """Text written by anyone but the person that the run has read so far (what it started with: its
        page, its asker's reads, its memories; then every outcome of its steps, a member's answer included),
        kept on the run's row as soon as it grows: a member it starts, a worker that takes it up again after
        a crash and the record all see it."""
        read = merge(self.run.others_text or [], self._read_before, *(read_in(step) for step in self.steps))
        if read != (self.run.others_text or []):
            self.journal.label(read)
        return read

    def _close_interrupted_steps(self) -> None:
        """Tool steps a dead worker left half-done are not run again: their outcome is unknown. A member
        asked is not one of them: its own run says how it went. Nor is a replay's call: it runs no view, so it is
        answered again from the recording, as the model asked it."""
        if self.replay is not None:
            return
        for step in self.steps:
            if step.kind == Kind.TOOL_CALL and step.state == State.STARTED and not is_waiting_on_member(step):
                self.journal.finish_step(step, {"status": "unknown", "took_effect": None, "reason": UNKNOWN_OUTCOME})

    def _resume_replay_position(self) -> None:
        # A replaying model (the scripted one) must continue where the run's earlier attempt stopped.
        seek = getattr(self.model, "seek", None)
        if callable(seek):
            seek(sum(1 for step in self.steps if step.kind == Kind.MODEL_CALL and step.took_effect is not False),
                 spec=str(self.config.get("spec") or self.run.spec))

    # --- context -----------------------------------------------------------------------------

    def _preamble(self) -> list[Message]:
        notices: list[str]
        if self.is_member:
            summary, conversation, notices = "", [member_task_message(self.run)], []
        else:
            keep = int(run_setting(self.run, "KEEP_MESSAGES"))
            summary, conversation, notices = conversation_window(
                self.run, self.history, keep=keep, summarise=self._summarise, store=self.journal.store_summary
            )
        for notice in notices:
            self._notice(notice)
        spec = str(self.config.get("spec") or self.run.spec)
        prompt = system_prompt(
            instructions=str(run_setting(self.run, "INSTRUCTIONS")),
            profile_line=profile_summary(owner=self.user, spec_name=spec),
        )
        notes = earlier_notes(memories=self._recall(conversation), summary=summary)  # data, never the system
        # The page the question was asked from, right before it (data too): what "this" and "here" mean.
        page = page_message(self.config.get("page")) if not self.is_member else []
        self.others_text()  # what the page and the memories carried is on the run's row before the model call
        return [Message.system(prompt), *notes, *conversation[:-1], *page, *conversation[-1:]]

    def _summarise(self, messages: list[Message]) -> ModelResponse:
        assert self.model is not None
        self.limits.before_model_call(self.steps, messages, continues=False)
        self.journal.flush()  # what happened so far is on the record before the model is waited for
        started = time.monotonic()
        response = fit_response(self.model.complete(messages))
        self._record_model_call(response, started, arguments={"purpose": "summarise"})
        return response

    def _recall(self, conversation: list[Message]) -> list[str]:
        if self.replay is not None:
            return []  # what the person's memories hold now is not what the recording was answered with
        limit = int(run_setting(self.run, "RECALL_LIMIT"))
        try:
            vector = self.question.vector()
        except EmbeddingError as exc:
            self._notice(f"Memory is unavailable for this turn ({exc}); answering without it.")
            return []
        embedder = self.question.embedder.name if self.question.embedder is not None else ""
        carried: list[dict[str, Any]] = []
        recalled = memory_recall(owner=self.user, spec=self.memory_spec, vector=vector, embedder=embedder, limit=limit,
                                 others_text=carried)
        # The step that read it was another run's: here it was read from the memory, before any step.
        self._read_before = merge(self._read_before, [
            {**{key: value for key, value in source.items() if key != "step"}, "where": "a memory"}
            for source in carried])
        return recalled

    def _transcript(self) -> list[Message]:
        """The run so far, from its steps: each model call that asked for tools, then their results, each
        result answering its call by the id the run recorded for it (unique within the run)."""
        messages: list[Message] = []
        for step in self.steps:
            result = step.result or {}
            if step.kind == Kind.MODEL_CALL and step.state == State.FINISHED and result.get("tool_calls"):
                calls = [ToolCall.from_dict(call) for call in result["tool_calls"]]
                messages.append(Message.assistant(result.get("text", ""), calls))
            elif step.kind == Kind.TOOL_CALL and step.state == State.FINISHED:
                messages.append(Message.tool(step.call_id, json.dumps(result, default=str)))
        return messages

    # --- model -------------------------------------------------------------------------------

    def _model_call(self, messages: list[Message]) -> ModelResponse:
        """One model call, recorded once it answers. It has no row while it runs: a call cut short by a
        crash has no effect to account for and is simply made again; one cut short by a cancel or the
        wall time is recorded with the text it had streamed so far."""
        assert self.model is not None
        offered: list[Any] = [*self.tools.values(), *self.delegations.values()]
        if self.planner:
            offered.append(self.planner)
        self.limits.before_model_call(self.steps, messages, offered)
        self.journal.flush()  # what happened so far is on the record before the model is waited for
        started = time.monotonic()
        self._streamed = []
        # A member whose answer is to be the reply (a handoff) writes to the person, and the panel streams its
        # text as the reply; not once its last action failed, for then its answer goes back to its asker.
        own_actions = [step for step in self.steps if step.kind == Kind.TOOL_CALL]
        self._to_person = bool(self.config.get("answers_person")) and not (own_actions and own_actions[-1].failed)
        name, attributes = chat_span(str(self.config.get("model") or self.run.model))
        try:
            with span(name, attributes, kind="client") as traced:
                response = self.model.call_tools(messages, offered, on_text_delta=self._on_delta)
                traced.set(chat_answered(provider=response.provider, model=response.model,
                                         input_tokens=response.usage.prompt_tokens,
                                         output_tokens=response.usage.completion_tokens))
        except StopRun as stop:
            self.journal.add(
                kind=Kind.MODEL_CALL, took_effect=False, reason=stop.message,
                result={"text": "".join(self._streamed), "tool_calls": [], "interrupted": True},
                duration_ms=int((time.monotonic() - started) * 1000),
            )
            raise
        response = fit_response(response)
        self._record_model_call(response, started)
        return response

    def _record_model_call(self, response: ModelResponse, started: float, arguments: dict[str, Any] | None = None
                           ) -> None:
        seq = (self.steps[-1].seq + 1) if self.steps else 1
        taken = {call_id for step in self.steps for call_id in ids_in((step.result or {}).get("tool_calls") or ())
                 if step.kind == Kind.MODEL_CALL}
        # Staged: written with what follows at once (the first call it asks for, or the reply).
        self.journal.add(
            stage=True, kind=Kind.MODEL_CALL, arguments=arguments or {},
            result={
                "text": response.text,
                "tool_calls": recorded_calls(response.tool_calls, step_seq=seq, taken=taken),
                "model": response.model, "provider": response.provider, "is_demo": response.is_demo,
            },
            prompt_tokens=response.usage.prompt_tokens, completion_tokens=response.usage.completion_tokens,
            cached_tokens=response.usage.cached_tokens,
            cost=call_cost(price_of(response.provider, response.model, table=self.run.config.get("prices")),
                           prompt_tokens=response.usage.prompt_tokens,
                           completion_tokens=response.usage.completion_tokens,
                           cached_tokens=response.usage.cached_tokens),
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    # --- tools -------------------------------------------------------------------------------

    def _pending_calls(self) -> list[PendingCall]:
        """Tool calls of the latest model call that have no finished step yet (with any step they have).
        A call is known by the id its model step recorded, unique within the run, never by the
        provider's id: two calls of one answer are two steps, whatever ids the model gave them."""
        last = next((s for s in reversed(self.steps) if s.kind == Kind.MODEL_CALL and s.state == State.FINISHED), None)
        if last is None:
            return []
        calls = (last.result or {}).get("tool_calls")
        if not calls:
            return []
        after = {step.call_id: step for step in self.steps if step.seq > last.seq and step.kind == Kind.TOOL_CALL}
        pending = []
        for raw in calls:
            call = ToolCall.from_dict(raw)
            existing = after.get(call.id)
            if existing is None or existing.state != State.FINISHED:
                pending.append(PendingCall(call, existing, raw.get("problem")))
        return pending

    def _work_through(self, pending: list[PendingCall]) -> bool:
        """Make the latest answer's calls that have no outcome yet, in order, each through what stands between
        it and its effect (assistant/turn/calls.py). Returns False when the run pauses (for the person's
        answer, or for its members)."""
        for item in pending:
            self._boundary()
            done = self.calls.call(item, pending)
            if done is Next.PAUSED:
                return False
            if done is Next.AGAIN:
                return True
        return True

    def _delegation_tools(self) -> list[DelegationTool]:
        """One tool per member this run's spec may ask from where it is in its tree (none when the spec
        declares no delegates: today's single assistant)."""
        spec = str(self.config.get("spec") or self.run.spec)
        try:
            seat = member(spec)
        except ValueError:
            return []  # an unknown spec: its run fails on its tools, saying which
        if not seat.delegates:
            return []
        path = run_path(self.run)[:-1] if self.run.parent_id is not None else []
        hands_over = run_setting(self.run, "HANDOFF") == "auto"
        # A run's first step may be a plain request's member (routing): its members are ranked for that intent.
        self.intent = self._plain_intent(seat) if not self.steps else None
        self.route = None
        if self.intent is not None:
            # Routing weighs only the members that may do the request, ranked among themselves; all of them are
            # ranked (and offered) only when the model is to decide.
            able = delegation_tools(owner=self.user, asking=seat, path=path, depth=self.run.depth,
                                    hands_over=hands_over, intent=self.intent.name, only=self.intent.members)
            self.route = plain_route(intent=self.intent, offered=able) if able else None
            if self.route is not None:
                return able
        return delegation_tools(owner=self.user, asking=seat, path=path, depth=self.run.depth,
                                hands_over=hands_over, intent=self.intent.name if self.intent is not None else None)

    def _plain_intent(self, seat: Member) -> PlainIntent | None:
        """What the request plainly asks for, when it may be routed (assistant/society/routing.py)."""
        if run_setting(self.run, "ROUTING") != "auto":
            return None
        if not self.is_member and len(self.history) > 1 and self.history[-2].role == AgentMessage.Role.ASSISTANT \
                and self.history[-2].content.rstrip().endswith("?"):
            return None  # it may answer the question the assistant asked: only the conversation says what it means
        request = self._request()
        if len(request) > TASK_MAX_CHARS:
            return None  # more than a member's task may hold: the model says it shorter
        return plain_intent_of(owner=self.user, asking=seat, request=request, members=seat.delegates)

    def _request(self) -> str:
        return self.run.task if self.is_member else (self.history[-1].content if self.history else "")

    def _hand_over(self, route: Route) -> None:
        """Routing: this run becomes the run of the member the request plainly belongs to, before any model call.
        From here it has that member's spec, model, instructions, tools and permission profile, its limits within
        this run's, and what it was sent with (its chat, page and session); the step that says why is written
        with the change, before the member's first model call."""
        self.config = run_routed_config(self.run, route.tool.member, reason=route.reason)
        self.journal.route(route.tool.member, self.config, reason=route.reason)
        self._equip()

    def _equip(self) -> None:
        """The model, tools, members and planner of the run's spec, for the person it acts as."""
        self.model = get_model(str(self.config.get("model") or DEFAULTS["MODEL"]))
        self._resume_replay_position()
        offered = tools_for(self.user, self.config.get("spec"), self.config.get("permission_profile") or None)
        self.tools = {tool.name: tool for tool in offered}
        self.delegations = {tool.name: tool for tool in self._delegation_tools()}
        self.planner = PlanTool() if run_setting(self.run, "PLANS") else None

    # --- finish ------------------------------------------------------------------------------

    def _succeed(self, text: str, handed: HandedOver | None = None) -> None:
        """End the run with its answer: its model's, or (`handed`) the answer of the member it handed over to."""
        reply = text.strip() or "Done."
        read = self.others_text()  # on the row (the record, and whoever it answers) before the run ends
        # Ending the run files it in the owner's profile, in the same transaction (see run_finish).
        try:
            if self.is_member:
                # A member answers the run that asked it, not the chat: its reply stays on its own row.
                self.journal.answer(reply, handed)
                return
            self.journal.succeed(self.user, reply, handed, question=self.history[-1] if self.history else None)
        except CancelledBeforeEnd:
            self._stop(self._stopped())
            return
        # The reply leaves before the bookkeeping below starts competing with it for the interpreter.
        publisher.flush(timeout=1.0)
        self._remember(reply, read)

    def _stop(self, stop: StopRun) -> None:
        # Ending the run files it in the owner's profile, in the same transaction (see run_finish).
        with contextlib.suppress(LeaseLost):  # ended elsewhere (the sweeper, another worker), and filed there
            self.others_text()
            self.journal.stop(stop.status, stop.stop_reason, stop.message)

    def _remember(self, reply: str, others_text: list[dict[str, Any]]) -> None:
        if self.replay is not None:
            return  # a replay writes nothing of the person's
        try:
            vector = self.question.vector()
        except EmbeddingError as exc:
            logger.warning("Run %s: not remembered (%s)", self.run.pk, exc)
            return
        if vector and self.question.embedder is not None:
            content = f"User asked: {self.question.text}\nAssistant answered: {reply}"
            memory_remember(owner=self.user, spec=self.memory_spec, content=content, vector=vector,
                            embedder=self.question.embedder, others_text=others_text)


def run_turn(
    run_id: int, *, holder: str, claim: Callable[[int, str], AgentRun | None], asked: dict[str, Any] | None = None,
    enqueue: Callable[[int], None] | None = None,
) -> str:
    """Claim the run and work on it until it answers, pauses or stops. Returns what happened.

    `asked` is what the task message may carry about the question ({"question", "embedder"}): with it,
    embedding the question starts before the run is claimed. The turn checks it against the stored
    message and embeds again if they differ; without it, embedding starts once the history is read.

    A run that hands work to members works on the first of them at once, still holding its own lease, and
    `enqueue`s the others of the same answer (members worked by other workers at the same time); it goes
    on when they have ended, or pauses (`awaiting_members`) while one waits for the person or works
    elsewhere. A member that ends wakes a run paused for it, and this worker then goes on with that run
    (assistant/turn/handoff.py). Each is claimed like any run: one another worker took first is skipped.
    """
    early: QuestionEmbedding | None = QuestionEmbedding.from_message(asked)
    following = [run_id]
    while following:
        current = following.pop(0)
        following.extend(_work_on(current, holder=holder, claim=claim, early=early, enqueue=enqueue))
        early = None
    return AgentRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "gone"


def _work_on(run_id: int, *, holder: str, claim: Callable[[int, str], AgentRun | None],
             early: QuestionEmbedding | None, enqueue: Callable[[int], None] | None) -> list[int]:
    """One claim of one run, worked until it answers, pauses or stops; returns the runs to go on with."""
    run = claim(run_id, holder)
    if run is None:
        return []
    following: list[int] = []

    def work_on_member(member_id: int) -> None:
        following.extend(_work_on(member_id, holder=holder, claim=claim, early=None, enqueue=enqueue))

    name, attributes = agent_span(spec=run.spec, run_id=run.pk, chat_id=run.chat_id, model=run.model)
    # The run's span continues the trace it was sent from (the person's message, or the run that asked it).
    with Heartbeat(run_id, holder) as heartbeat, span(name, attributes, parent=(run.config or {}).get("trace")):
        turn: Turn | None = None
        try:
            turn = Turn(run, heartbeat, early, work_on_member=work_on_member, enqueue=enqueue)
            turn.execute()
        except Exception as exc:
            logger.exception("Run %s crashed", run_id)
            if turn is not None:
                try:  # the outcomes it had (staged writes) go on the record before it ends
                    turn.journal.flush()
                except Exception:  # the database or the lease is what failed: the steps stay unfinished
                    logger.warning("Run %s: its staged steps could not be written", run_id, exc_info=True)
            current = AgentRun.objects.filter(pk=run_id, lease_owner=holder).first()
            # Taken over in the meantime (LeaseLost): the new holder goes on with the run, untouched.
            if current is not None and current.is_active:
                with contextlib.suppress(LeaseLost):
                    run_finish(run=current, status=Status.FAILED, stop_reason=AgentRun.StopReason.INTERNAL_ERROR,
                               error=f"Something went wrong inside the assistant ({type(exc).__name__}).",
                               holder=holder)
    if run.parent_id is not None:
        # A member that ended wakes the run that asked it, if that one paused for it (see handoff.py).
        ended = AgentRun.objects.filter(pk=run_id).only("pk", "parent_id", "status").first()
        if ended is not None and not ended.is_active and run_parent_wake(ended):
            following.append(run.parent_id)
    return following
