"""The event stream of one AG-UI run: server-sent events, in daphne's event loop, holding no database connection.

It subscribes to the person's group on the channel layer first (the group the panel's sockets join), then
does what the input asks (`assistant.agui.runs.begin`, one trip to a database thread), so that nothing
published after is missed. From then on it relays the models' streamed text as it comes, and, when anything
else of the tree happens (a step, an approval asked, an answer, an end), reads the tree's rows again and says
what they add (`assistant.agui.translate`). A lost event, a gap in the person's event numbers or ten quiet seconds
costs a read of the rows, never a wrong stream. Each read is one trip to a database thread that gives its
connection back to the pool when it returns: a thousand streams waiting on their runs hold no connection.

The stream ends with the run (RUN_FINISHED, or RUN_ERROR), or when the run pauses for the person (RUN_FINISHED
with the interrupt outcome). The client going away ends it too (Django cancels the response); the run goes on
in its worker, and the same `runId` posted again (without `resume`) re-attaches to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
)
from ag_ui.encoder import EventEncoder
from channels.layers import get_channel_layer

from assistant.agui.runs import Begun, Caller, begin, in_db_thread, messages_snapshot, tree_state
from assistant.agui.translate import SnapshotHere, Translator
from assistant.conversation.services import Refused
from assistant.infra import event_names
from assistant.infra.outage import UNAVAILABLE_ERRORS
from assistant.live.events import user_group
from assistant.live.selectors import NotFound
from assistant.models import AgentChat

logger = logging.getLogger(__name__)

#: With nothing to say for this long, the stream sends an SSE comment (proxies keep it open) and reads the
#: tree's rows again (what a lost event would have said).
QUIET_SECONDS = 10.0
UNAVAILABLE = "The assistant is briefly unavailable; in a moment, post the same runId again to see what was done."
#: The panel's events that change nothing the rows say: the streamed text is relayed, a plan forwarded.
_RELAYED = frozenset({event_names.TEXT_DELTA, event_names.PLAN})


def _begin(caller: Caller, inp: RunAgentInput) -> Begun:
    """`begin`, where Redis refusing what follows the commit (starting the run, announcing it) still leaves
    the stored request to follow: the sweeper starts a stored run once Redis is back."""
    outcome: Begun | None = None

    def note(found: Begun) -> Begun:
        nonlocal outcome
        outcome = found
        return found

    from django.db import IntegrityError, transaction

    try:
        with transaction.atomic():
            try:
                with transaction.atomic():
                    return note(begin(caller, inp))
            except IntegrityError:
                # The same runId posted twice at once: the other request's run is the one; this one attaches to
                # it (everything this one did was rolled back with its row).
                return note(begin(caller, inp))
    except UNAVAILABLE_ERRORS:
        if outcome is None:
            raise
        logger.warning("AG-UI run %s is stored but could not be started now; the sweeper will start it",
                       inp.run_id, exc_info=True)
        return outcome


def _snapshot(user: Any, chat_id: int) -> MessagesSnapshotEvent:
    chat = AgentChat.objects.for_user(user).filter(pk=chat_id).first()
    return MessagesSnapshotEvent(messages=messages_snapshot(user, chat) if chat is not None else [])


class _Events:
    """The person's events, one channel-layer receive kept waiting across quiet spells: cancelling a receive
    would drop the channel's subscription (channels_redis's Pub/Sub layer unsubscribes a cancelled receive)."""

    def __init__(self, layer: Any, channel: str) -> None:
        self.layer, self.channel = layer, channel
        self._waiting: asyncio.Future[Any] | None = None

    async def next(self, timeout: float) -> dict[str, Any] | None:
        if self._waiting is None:
            self._waiting = asyncio.ensure_future(self.layer.receive(self.channel))
        done, _ = await asyncio.wait({self._waiting}, timeout=timeout)
        if not done:
            return None
        message, self._waiting = self._waiting.result(), None
        return message if isinstance(message, dict) else None

    def close(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()


async def agui_stream(caller: Caller, inp: RunAgentInput) -> AsyncIterator[str]:
    """The SSE body of one AG-UI run (see the module docstring)."""
    encoder = EventEncoder()
    layer = get_channel_layer()
    group = user_group(caller.user.pk)
    channel = await layer.new_channel(prefix="assistant.agui.")
    events = _Events(layer, channel)
    try:
        await layer.group_add(group, channel)
        async for event in _run(caller, inp, events):
            yield event if isinstance(event, str) else encoder.encode(event)
    except UNAVAILABLE_ERRORS:
        logger.warning("AG-UI stream of run %s ended: Redis or the database is out of reach", inp.run_id,
                       exc_info=True)
        yield encoder.encode(RunErrorEvent(message=UNAVAILABLE, code="unavailable"))
    except Exception:  # the response has begun (200): the client is told in the protocol, never a cut stream
        logger.exception("AG-UI stream of run %s failed", inp.run_id)
        yield encoder.encode(RunErrorEvent(message="Something went wrong following this run; post the same runId "
                                                   "again to see it as recorded.", code="internal_error"))
    finally:
        events.close()
        with contextlib.suppress(Exception):
            await layer.group_discard(group, channel)


async def _run(caller: Caller, inp: RunAgentInput, events: _Events) -> AsyncIterator[Any]:
    user = caller.user
    try:
        begun = await in_db_thread(_begin)(caller, inp)
    except Refused as refused:
        # The protocol's error has words only: what is wrong with each value the person typed is said in them.
        problems = " ".join(f"{name}: {problem}" for name, problem in (refused.fields or {}).items())
        yield RunErrorEvent(message=f"{refused.message} {problems}".strip(), code=refused.code)
        return
    except NotFound as missing:
        yield RunErrorEvent(message=str(missing) or "Not found.", code="not_found")
        return
    yield RunStartedEvent(thread_id=inp.thread_id, run_id=inp.run_id, protocol_version=PROTOCOL_VERSION,
                          metadata={"chatId": begun.chat_id, "assistantRunId": begun.top_run_id,
                                    "mode": begun.mode})
    if begun.mode == "reload":
        yield MessagesSnapshotEvent(messages=begun.snapshot or [])
        yield RunFinishedEvent(thread_id=inp.thread_id, run_id=inp.run_id, outcome=RunFinishedSuccessOutcome())
        return
    assert begun.top_run_id is not None
    top = begun.top_run_id
    translator = Translator(thread_id=inp.thread_id, run_id=inp.run_id, top=top)
    seq: int | None = None
    if begun.mode == "attached":
        yield MessagesSnapshotEvent(messages=begun.snapshot or [])
    if begun.state is not None and begun.mode in ("attached", "resumed"):
        seq = begun.state.get("event_seq")
        for event in translator.prime(begun.state, answered=begun.answered):
            yield event
    state = begun.state if begun.mode == "attached" and begun.state is not None else \
        await in_db_thread(tree_state)(user, top)
    if seq is None:
        seq = state.get("event_seq")
    async for event in _said(translator, translator.rows(state), user, begun.chat_id):
        yield event
    while not translator.finished:
        message = await events.next(QUIET_SECONDS)
        stale = message is None
        if stale:
            yield ": the run is still at work\n\n"
        for event in (message or {}).get("events", []):
            number = event.get("event_seq")
            if isinstance(number, int) and seq is not None and number > seq + 1:
                stale = True  # an event of the person's went missing on the way: the rows say what it said
            if isinstance(number, int):
                seq = max(seq or 0, number)
            kind = event.get("type")
            if kind == event_names.RESYNC:
                stale = True
                continue
            if event.get("run_id") != top and event.get("root_run_id") != top:
                continue
            if kind in _RELAYED:
                if stale:  # the rows first: a delta is placed after the steps written before it
                    stale = False
                    state = await in_db_thread(tree_state)(user, top)
                    async for said in _said(translator, translator.rows(state), user, begun.chat_id):
                        yield said
                run = event["run_id"]
                found = (translator.token(run, event.get("delta"), event) if kind == event_names.TEXT_DELTA
                         else translator.plan(run, event.get("plan")))
                for said in found:
                    yield said
            else:
                stale = True
        if stale and not translator.finished:
            state = await in_db_thread(tree_state)(user, top)
            async for said in _said(translator, translator.rows(state), user, begun.chat_id):
                yield said


async def _said(translator: Translator, found: list[Any], user: Any, chat_id: int) -> AsyncIterator[Any]:
    for event in found:
        if isinstance(event, SnapshotHere):
            yield await in_db_thread(_snapshot)(user, chat_id)
        else:
            yield event
