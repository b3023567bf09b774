"""What an AG-UI request does to the person's rows, and what the stream reads back: synchronous, one trip to a
database thread each (the stream holds no connection between them).

`begin` decides what a `RunAgentInput` asks for (docs/ag-ui.md, "Runs"), in one transaction:

- `resume` answers the interrupts of a paused run through `assistant.conversation.services.run_confirm`, the panel's own
  answer (a stale or forged interrupt id is refused there, and nothing changes); the run goes on in a worker.
  Whatever its `runId`: a client may resume under the runId of the run that asked (CopilotKit does), and an
  answer given once is refused the second time, never given twice;
- a `runId` the person posted before, without `resume`, re-attaches to the run it followed; nothing new is
  started;
- a new message of the person (the input's last message, a `user` message the thread has not sent before)
  is `assistant.conversation.services.chat_send`, the panel's own send: stored, one active run per chat, queued for the
  worker, every rule of the panel included;
- otherwise the thread's chat as it is: its run at work re-attached, or a messages snapshot of it.

`tree_state` reads a top run's tree (its members and their steps, as the panel's events carry them) for
`assistant.agui.translate`; `messages_snapshot` the chat as AG-UI messages.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    ResumeEntry,
    RunAgentInput,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import close_old_connections, connections, transaction

from assistant.access.authority import SentFrom
from assistant.agui.models import AguiRun
from assistant.agui.translate.interrupts import waiting_steps
from assistant.agui.translate.wire import as_json, call_id, is_said_by, msg_id, result_id, subagent_id
from assistant.attachments.store import AttachmentRefused, attachment_get, attachment_store
from assistant.conversation import services
from assistant.conversation.services import Refused
from assistant.live import selectors
from assistant.live.events import current_event_seq
from assistant.live.payloads import message_payload, run_payload, step_payload
from assistant.live.selectors import NotFound
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.runs.allowances import allowance_note
from assistant.society.members import member
from assistant.tools.registry import registry

T = TypeVar("T")
#: The newest messages of the chat a messages snapshot holds.
SNAPSHOT_MESSAGES = 100
#: `approval-<step id>`: the only interrupt ids this endpoint gives.
_INTERRUPT_PREFIX = "approval-"


@dataclass(frozen=True)
class Caller:
    """Who asks: the person, the access token they ask with (None for their browser session) and the session
    (None for a token: a token's run acts as the person with no browser session, as code that names its
    person does; see assistant/access/authority.py)."""

    user: Any
    token: Any = None
    sent_from: SentFrom | None = None

    @property
    def read_only(self) -> bool:
        return bool(self.token is not None and self.token.read_only)


@dataclass
class Begun:
    """What the stream follows. `mode`: `started`, `resumed`, `attached` or `reload` (no run: a snapshot).
    `state` is the tree as the client now holds it for `resumed` (read before the answer) and `attached`
    (with `snapshot`, the chat as AG-UI messages); for `started` the new run's tree."""

    mode: str
    chat_id: int
    top_run_id: int | None = None
    state: dict[str, Any] | None = None
    snapshot: list[Any] | None = None
    answered: frozenset[int] = field(default_factory=frozenset)


class BadResume(Refused):
    pass


def _user_text(message: UserMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(str(getattr(part, "text", "")) for part in content if getattr(part, "type", None) == "text")


def _user_files(user: Any, message: UserMessage) -> list[int]:
    """The files of the message's binary, image and document parts, kept as the person's attachments (within the
    same limits as the panel's uploads); their ids. A part naming the id of one of their attachments is that one.
    A file given by URL is refused: the assistant fetches nothing from elsewhere."""
    if isinstance(message.content, str):
        return []
    ids = []
    for part in message.content:
        kind = getattr(part, "type", None)
        if kind == "text":
            continue
        if kind not in ("binary", "image", "document"):
            raise Refused("bad_request", f"A message part of type {kind!r} does not reach the assistant: send text, "
                                         "or files as binary, image or document parts.")
        source = getattr(part, "source", None)
        data = getattr(part, "data", None) or (getattr(source, "value", None)
                                               if getattr(source, "type", None) == "data" else None)
        mime_type = getattr(part, "mime_type", None) or getattr(source, "mime_type", None) or "application/octet-stream"
        if data is None and kind == "binary" and getattr(part, "id", None) and str(part.id).isdigit():
            found = attachment_get(user=user, attachment_id=part.id)
            if found is None:
                raise Refused("not_found", f"No attachment {part.id!r} of yours to send.")
            ids.append(found.pk)
            continue
        if data is None:
            raise Refused("bad_request", "A file must come as its data (base64); the assistant fetches nothing from a "
                                         "URL.")
        try:
            body = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise Refused("bad_request", "A file's data must be base64.") from None
        name = getattr(part, "filename", None) or (getattr(part, "metadata", None) or {}).get("filename") or "file"
        try:
            stored = attachment_store(user=user, upload=SimpleUploadedFile(str(name), body, content_type=mime_type))
        except AttachmentRefused as refused:
            raise Refused(refused.code, refused.message) from None
        ids.append(stored.pk)
    return ids


def thread_chat(user: Any, thread_id: str) -> AgentChat | None:
    """The chat of the person's thread: the newest of its runs names it (a deleted chat is gone for them)."""
    row = AguiRun.objects.for_user(user).filter(thread_id=thread_id).select_related("chat").first()
    return row.chat if row is not None else None


def _check_token_may(caller: Caller, chat: AgentChat | None) -> None:
    token = caller.token
    if token is None or chat is None:
        return
    if chat.spec != token.spec:
        raise Refused("token_spec", f"This thread talks to the assistant “{chat.spec}”, and the access token acts "
                                    f"as “{token.spec}”: start a new thread with this token.")


def _resume_answers(resume: list[ResumeEntry]) -> list[tuple[int, bool, str, dict[str, Any] | None]]:
    """Each entry as (step id, approve, comment, the values approved instead of the model's, if any); BadResume
    for an entry this endpoint did not ask."""
    answers: list[tuple[int, bool, str, dict[str, Any] | None]] = []
    seen: set[int] = set()
    for entry in resume:
        number = entry.interrupt_id.removeprefix(_INTERRUPT_PREFIX)
        if not entry.interrupt_id.startswith(_INTERRUPT_PREFIX) or not number.isascii() or not number.isdigit() \
                or len(number) > 18:
            raise NotFound(f"No interrupt {entry.interrupt_id!r} waits in this thread.")
        step_id = int(number)
        if step_id in seen:
            raise BadResume("bad_request", f"The interrupt {entry.interrupt_id!r} is answered twice.")
        seen.add(step_id)
        if entry.status == "cancelled":
            # Abandoned: the action is not taken, as when the person declines it in the panel.
            answers.append((step_id, False, "", None))
            continue
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        approve = payload.get("approve")
        comment = payload.get("comment", "")
        if not isinstance(approve, bool):
            raise BadResume("bad_request", 'A resolved approval carries {"approve": true} or {"approve": false} as '
                                           "its payload.")
        if not isinstance(comment, str) or "\x00" in comment:
            raise BadResume("bad_request", '"comment" must be a string without NUL characters.')
        arguments = payload.get("arguments")  # approve with changes: the values the person approved
        if arguments is not None and not isinstance(arguments, dict):
            raise BadResume("bad_request", '"arguments" must be an object of the action\'s values.')
        answers.append((step_id, approve, comment, arguments))
    return answers


def _resume(caller: Caller, inp: RunAgentInput, chat: AgentChat | None, *, new_run_id: bool) -> Begun:
    if chat is None:
        raise NotFound("No interrupt waits in this thread.")
    answers = _resume_answers(inp.resume or [])
    if not answers:
        raise BadResume("bad_request", '"resume" answers at least one interrupt.')
    user = caller.user
    steps = {step.pk: step for step in AgentStep.objects.for_user(user).select_related("run")
             .filter(pk__in=[step_id for step_id, *_ in answers])}
    tops = set()
    for step_id, approve, *_ in answers:
        step = steps.get(step_id)
        if step is None or step.run.chat_id != chat.pk:  # another person's, or another chat's: as missing
            raise NotFound(f"No interrupt {_INTERRUPT_PREFIX}{step_id} waits in this thread.")
        if approve and caller.read_only:
            raise Refused("read_only", "A read-only access token cannot approve an action; nothing was done.")
        tops.add(step.run.root_id or step.run_id)
    if len(tops) != 1:
        raise BadResume("bad_request", "A resume answers the interrupts of one run.")
    (top,) = tops
    # What the client holds: the tree as the interrupted run left it, read before it is answered.
    before = tree_state(user, top)
    for step_id, approve, comment, arguments in answers:
        # The panel's answer, with its rules: the step must be the one its run waits on now, else
        # `stale_confirmation`, and nothing changes (the transaction this runs in rolls every answer back).
        try:
            services.run_confirm(user=user, run_id=steps[step_id].run_id, step_id=step_id, approve=approve,
                                 comment=comment, arguments=arguments)
        except Refused as refused:
            if refused.code != "stale_confirmation":
                raise
            # A resume sent again (its stream was lost, say) lands here too, and the client's pending interrupt
            # stays: the way on is to read the run as the first answer left it.
            raise Refused(refused.code, f"{refused.message} To see the run as it is, post the same input again "
                                        "without resume.") from refused
    if new_run_id:
        AguiRun.objects.create(owner=user, thread_id=inp.thread_id, run_id=inp.run_id, chat=chat,
                               assistant_run_id=top, kind=AguiRun.Kind.RESUMED,
                               token_id=caller.token.pk if caller.token else None)
    # Else the runId is the one of the run that asked (or another of the thread's): its row stays as it is, and
    # posted again without `resume` it re-attaches to the run it names.
    return Begun(mode="resumed", chat_id=chat.pk, top_run_id=top, state=before,
                 answered=frozenset(step_id for step_id, *_ in answers))


def _send(caller: Caller, inp: RunAgentInput, chat: AgentChat | None, message: UserMessage) -> Begun:
    user, token = caller.user, caller.token
    text = _user_text(message)
    if "\x00" in text:  # PostgreSQL text cannot hold it
        raise Refused("bad_request", "A message must not contain NUL characters.")
    if token is not None:
        if token.read_only and member(token.spec).delegates:
            # A member's run takes its own spec's profile, not the token's narrowing: it would write.
            raise Refused("read_only", f"The assistant “{token.spec}” hands work to members, who are not read-only: "
                                       "a read-only token cannot talk to it. Use a token of an assistant without "
                                       "members.")
        if chat is None:
            # A token's thread talks to the token's assistant, as its MCP calls do.
            chat = AgentChat.objects.create(owner=user, spec=token.spec)
    files = _user_files(user, message)
    sent = services.chat_send(user=user, content=text, chat_id=chat.pk if chat is not None else None,
                              new_chat=chat is None, request_id=inp.run_id, sent_from=caller.sent_from,
                              page=_page_of(inp), attachments=files)
    run = sent.run
    config = {**run.config, "agui": {"thread_id": inp.thread_id, "run_id": inp.run_id,
                                     "auth": "token" if token is not None else "session"}}
    fields: dict[str, Any] = {}
    if token is not None:
        config["agui"]["token"] = token.pk
        if token.read_only:
            config["permission_profile"] = "restricted"  # as its MCP calls: never a write, whatever the spec says
        # A revoked token's run that waits for an approval ends, as its MCP calls do (token_calls_end).
        fields.update(client_name=token.name, client_token_id=token.pk)
    AgentRun.objects.filter(pk=run.pk).update(config=config, **fields)
    AguiRun.objects.create(owner=user, thread_id=inp.thread_id, run_id=inp.run_id, chat=sent.chat,
                           assistant_run=run, kind=AguiRun.Kind.STARTED, message_id=message.id,
                           token_id=token.pk if token is not None else None)
    return Begun(mode="started", chat_id=sent.chat.pk, top_run_id=run.pk)


def _page_of(inp: RunAgentInput) -> Any:
    """The page the frontend asks from, as the panel sends it (`page` on `assistant.send`): the path in
    `forwardedProps.page`, or None. What it is not (not a string, not a path of the site) is refused by the
    send (`bad_page`), never guessed at."""
    props = inp.forwarded_props
    return props.get("page") if isinstance(props, dict) else None


def _new_message(user: Any, inp: RunAgentInput) -> UserMessage | None:
    """The input's last message when it is the person's and the thread has not sent it before."""
    last = inp.messages[-1] if inp.messages else None
    if not isinstance(last, UserMessage):
        return None
    sent_before = AguiRun.objects.for_user(user).filter(thread_id=inp.thread_id, message_id=last.id).exists()
    return None if sent_before else last


def begin(caller: Caller, inp: RunAgentInput) -> Begun:
    """What `inp` asks for, done (see the module docstring). Raises Refused or NotFound, changing nothing."""
    user = caller.user
    with transaction.atomic():
        known = AguiRun.objects.for_user(user).filter(run_id=inp.run_id).select_related("chat").first()
        if known is None and AguiRun.objects.filter(owner=user, run_id=inp.run_id).exists():
            raise NotFound("That run's conversation was deleted.")
        if known is not None and known.thread_id != inp.thread_id:
            raise Refused("bad_request", "That runId belongs to another threadId.")
        if inp.resume:
            # An answer, whatever its runId: read first, since a client may resume under the runId of the run
            # that asked, which would otherwise re-attach to the question and answer nothing.
            chat = thread_chat(user, inp.thread_id)
            _check_token_may(caller, chat)
            if _new_message(user, inp) is not None:
                raise BadResume("bad_request", "A resume answers the interrupts; send a new message in the run after.")
            return _resume(caller, inp, chat, new_run_id=known is None)
        if known is not None:
            _check_token_may(caller, known.chat)
            return _attach(user, known.chat, known.assistant_run_id)
        chat = thread_chat(user, inp.thread_id)
        _check_token_may(caller, chat)
        message = _new_message(user, inp)
        if message is not None:
            return _send(caller, inp, chat, message)
        if chat is None:
            raise Refused("empty_message", "Type a message first: a new thread starts with the person's message.")
        active = selectors.chat_active_run(chat=chat)
        if active is None:
            return Begun(mode="reload", chat_id=chat.pk, snapshot=messages_snapshot(user, chat))
        AguiRun.objects.create(owner=user, thread_id=inp.thread_id, run_id=inp.run_id, chat=chat,
                               assistant_run=active, kind=AguiRun.Kind.ATTACHED,
                               token_id=caller.token.pk if caller.token else None)
        return _attach(user, chat, active.pk)


def _attach(user: Any, chat: AgentChat, top: int) -> Begun:
    # The tree first, then the messages: a step written in between is in the snapshot and said again by
    # nobody (the translator is primed with the tree, and says a step finished after it once).
    state = tree_state(user, top)
    return Begun(mode="attached", chat_id=chat.pk, top_run_id=top, state=state,
                 snapshot=messages_snapshot(user, chat))


def tree_state(user: Any, top_id: int) -> dict[str, Any]:
    """The top run `top_id` and its members, each with its steps (payloads as the panel's events carry them) and
    the member's run that answered for it, if one did (`answered_by`); the top run's reply, and the tools the
    waiting steps would run; `gone` when the run is not the person's (any more: its chat was deleted).
    `event_seq` is the person's count read first: every event numbered up to it is in these rows."""
    event_seq = current_event_seq(user.pk)
    top = AgentRun.objects.for_user(user).filter(pk=top_id).first()
    if top is None:
        return {"gone": True, "runs": [], "event_seq": event_seq}
    runs = [top, *selectors.run_members(run=top)]
    steps: dict[int, list[dict[str, Any]]] = {run.pk: [] for run in runs}
    for step in AgentStep.objects.filter(run_id__in=steps).order_by("run_id", "seq"):
        steps[step.run_id].append(step_payload(step))
    reply = (AgentMessage.objects.filter(run=top, role=AgentMessage.Role.ASSISTANT).select_related("run")
             .order_by("-created_at", "-id").first())
    tree = [{**run_payload(run), "answered_by": run.answered_by_id, "steps": steps[run.pk]} for run in runs]
    tools: dict[str, Any] = {}
    for _, waiting in waiting_steps(tree):
        definition = registry.get(waiting["tool_name"])
        if definition is not None:
            tools[waiting["tool_name"]] = {"description": definition.description,
                                        "destructive": bool(getattr(definition, "destructive", False))}
    return {"runs": tree, "reply": message_payload(reply) if reply is not None else None, "tools": tools,
            "event_seq": event_seq,
            # How much is left of the person's allowance once little is, as the panel's reply says it.
            "allowance": allowance_note(top) if reply is not None else None}


def messages_snapshot(user: Any, chat: AgentChat) -> list[Any]:
    """The chat's newest SNAPSHOT_MESSAGES messages as AG-UI messages, with every step of their runs: each model
    call an assistant message (its text and the tool calls it made), each tool result a tool message, a member's
    messages (attributed to it) where the step that asked it is. Named as the live stream names them."""
    page = selectors.chat_messages_page(chat=chat, limit=SNAPSHOT_MESSAGES, with_steps=True)
    client_ids = dict(AguiRun.objects.for_user(user).filter(chat=chat, kind=AguiRun.Kind.STARTED)
                      .values_list("assistant_run_id", "message_id"))
    runs = {run.pk: run for run in page.runs}
    children: dict[int, list[int]] = {}
    for run in page.runs:
        if run.asked_in_id is not None:
            children.setdefault(run.asked_in_id, []).append(run.pk)
    last_text: dict[int, str] = {}
    out: list[Any] = []

    def walk(run_id: int) -> None:
        steps = page.steps.get(run_id, [])
        sub = subagent_id(run_id) if runs[run_id].parent_id is not None else None
        holders: dict[int, AssistantMessage] = {}
        model_seq = 0
        for step in steps:
            if step.kind == AgentStep.Kind.MODEL_CALL:
                model_seq = step.seq
                text = (step.result or {}).get("text") or ""
                last_text[run_id] = text
                holders[model_seq] = AssistantMessage(id=msg_id(run_id, model_seq), content=text or None,
                                                      subagent_run_id=sub)
                out.append(holders[model_seq])
            elif step.kind == AgentStep.Kind.TOOL_CALL:
                holder = holders.get(model_seq)
                # A tool step no model call made: a routed request as recorded before it became the member's run.
                if holder is None:
                    holder = holders[model_seq] = AssistantMessage(id=msg_id(run_id, model_seq), subagent_run_id=sub)
                    out.append(holder)
                holder.tool_calls = [*(holder.tool_calls or []), ToolCall(
                    id=call_id(run_id, step.seq),
                    function=FunctionCall(name=step.tool_name, arguments=as_json(step.arguments)))]
                for child in children.get(step.pk, []):
                    if child in runs:
                        walk(child)
                if step.state == AgentStep.State.FINISHED:
                    out.append(ToolMessage(id=result_id(run_id, step.seq), tool_call_id=call_id(run_id, step.seq),
                                           content=as_json(step.result)))
        for holder in holders.values():
            if not holder.content and not holder.tool_calls:
                out.remove(holder)

    for message in page.messages:
        if message.role == AgentMessage.Role.USER:
            out.append(UserMessage(id=client_ids.get(message.run_id) or f"user-{message.pk}",
                                   content=message.content))
            answering = page.answered_by.get(message.pk)  # its run on this branch (one answering it again)
            if answering in runs:
                walk(answering)
        elif message.content and not is_said_by(message.content, last_text.get(_writer(message, runs), "")):
            # A reply that is not already there as the text of the model call that wrote it (its run's, or the
            # member's that answered for it): a limit's or a fallback's words.
            out.append(AssistantMessage(id=f"reply-{message.pk}", content=message.content))
    return out


def _writer(message: AgentMessage, runs: dict[int, AgentRun]) -> int:
    """The run whose model wrote a reply: its own run's, or the member's whose answer it is (a handoff)."""
    run = runs.get(message.run_id or 0)
    if run is None:
        return message.run_id or 0
    return run.answered_by_id or run.pk


def release_connections() -> None:
    """Give this thread's database connections back (to the process's pool), as Django does at a request's
    end: a stream would otherwise keep the one its last read used for as long as it lasts. Not inside an
    atomic block (a test's transaction), whose connection must stay."""
    if not any(connection.in_atomic_block for connection in connections.all(initialized_only=True)):
        close_old_connections()


def in_db_thread(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """`function` run in the request's database thread, its connections given back before and after (as
    channels' `database_sync_to_async` does, but leaving a test's transaction alone)."""

    def run(*args: Any, **kwargs: Any) -> T:
        release_connections()
        try:
            return function(*args, **kwargs)
        finally:
            release_connections()

    return sync_to_async(run, thread_sensitive=True)


def parse_json(body: bytes) -> Any:
    """The body as JSON, refusing what cannot travel on (see assistant/conversation/frames.py `frame_parse`)."""

    def no_constants(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    def finite(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")) or value != value:
            raise ValueError("not a finite number")
        return value

    return json.loads(body, parse_constant=no_constants, parse_float=finite)
