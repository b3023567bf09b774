"""The assistant's records. Every row belongs to one owner; `for_user(user)` is the only way
code outside the admin reads them."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import VectorField

from assistant.channel_policies import MAX_VALUE_CHARS, PANEL, channel_choices, shown_to_person_values
from assistant.conf import DEFAULTS


class OwnedQuerySet(models.QuerySet):
    """Rows whose `owner_path` is the given user; nothing for anonymous users. A row that belongs to a
    chat its person deleted (`chat_path` names the chat's deleted_at) is gone for them too: only staff,
    in the admin, still see it."""

    owner_path = "owner"
    deleted_path: str | None = None
    # The chat's channel: only the channels shown to their person (assistant/channel_policies.py) are theirs to
    # read; an eval's replay, say, is staff's record.
    channel_path: str | None = None

    def for_user(self, user: Any) -> OwnedQuerySet:
        if user is None or not getattr(user, "is_authenticated", False):
            return self.none()
        rows = self.filter(**{self.owner_path: user})
        if self.deleted_path is not None:
            rows = rows.filter(**{f"{self.deleted_path}__isnull": True})
        if self.channel_path is not None:
            rows = rows.filter(**{f"{self.channel_path}__in": shown_to_person_values()})
        return rows


class ChatQuerySet(OwnedQuerySet):
    deleted_path = "deleted_at"
    channel_path = "channel"


class ChatPartQuerySet(OwnedQuerySet):
    """Messages and runs: gone for their person with their chat."""

    deleted_path = "chat__deleted_at"
    channel_path = "chat__channel"


class AttachmentQuerySet(OwnedQuerySet):
    """Attachments: gone for their person with the chat they were sent in (one not sent yet has none)."""

    deleted_path = "message__chat__deleted_at"


class StepQuerySet(OwnedQuerySet):
    owner_path = "run__owner"
    deleted_path = "run__chat__deleted_at"
    channel_path = "run__chat__channel"


class AgentChat(models.Model):
    """One conversation. A person's most recently updated chat is their current one.

    Its channel says where its work is asked from (assistant/channel_policies.py): the person's panel, where they
    type, or a channel an optional app registers. A chat of the person's own agent (channel `mcp`) is the record
    of what one of their access tokens did as them: each call of their agent is a run in it. The person reads
    it like any chat, and does not type in it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_chats")
    spec = models.CharField(max_length=100, default="default")
    channel = models.CharField(max_length=MAX_VALUE_CHARS, choices=channel_choices, default=PANEL.value)
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Bumped when a message is sent in it: the most recently updated chat is the person's current one.
    updated_at = models.DateTimeField(auto_now=True, db_index=False)
    # The time of its newest message, the person's or a reply (summaries aside): the order of the
    # person's list of chats. Kept here, not computed, so the list is an index walk.
    last_activity_at = models.DateTimeField(default=timezone.now)
    # Set when its person deletes it: the chat, its messages, runs and steps are then gone for them
    # (`for_user` never returns them) and kept as evidence for staff.
    deleted_at = models.DateTimeField(null=True, blank=True)
    # The newest message of the branch the person reads, once they have edited a message, answered one again or
    # turned to another branch (see assistant/live/threads.py); null until then: the chat's newest message.
    leaf = models.ForeignKey("AgentMessage", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    objects = ChatQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="chat_owner_recent"),
            # A person's chats, newest activity first, walked page by page (selectors.chats_list).
            models.Index(fields=["owner", "-last_activity_at", "-id"], name="chat_owner_activity",
                         condition=Q(deleted_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return self.title or f"Chat {self.pk}"


class AgentMessage(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SUMMARY = "summary"

    chat = models.ForeignKey(AgentChat, on_delete=models.CASCADE, related_name="messages")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField()
    run = models.ForeignKey(
        "AgentRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    # A reply a member wrote (a handoff): its spec, which the thread names beside the reply.
    member = models.CharField(max_length=100, blank=True)
    # For a reply: the pages of this site it links to that its person could open when it was written (checked as
    # them, assistant/live/links.py); a link to any other page of the site is shown as its text. Null: written
    # before links were checked.
    links = models.JSONField(null=True, blank=True)
    # The message this one follows in its thread: a question follows the answer before it (or a question left
    # unanswered), an answer its question. Messages with one parent are each other's branches: an edited
    # question beside the one it rewrote, an answer given again beside the earlier one. Null for a chat's first
    # messages and for summaries, which are the assistant's notes, not part of a thread. A message whose parent was
    # pruned (assistant/conversation/retention.py) starts the thread: older evidence going takes nothing newer.
    parent = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children")
    # For a summary: the id of the newest message folded into it, so it is reused until older turns grow.
    covers_through = models.BigIntegerField(null=True, blank=True)
    # Set when made, as auto_now_add would, but a reply may be given the moment its chat's activity was
    # recorded at, in the same transaction (see StepJournal.succeed).
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = ChatPartQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["chat", "created_at"], name="message_chat_created")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class AgentRun(models.Model):
    """One turn: the work the assistant did to answer one user message."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        AWAITING_CONFIRMATION = "awaiting_confirmation"
        # Waiting for the members it asked (its children) to answer: it holds no worker meanwhile, and the
        # end of its last working child puts it back on the queue (assistant/turn/handoff.py).
        AWAITING_MEMBERS = "awaiting_members"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        TIMED_OUT = "timed_out"

    class StopReason(models.TextChoices):
        """Why a run ended without simply answering (docs/protocol.md, the table of `stop_reason`). The field
        keeps the bare value and has no choices: staff read the value itself in the admin, as before."""

        # `failed`: a limit of the run's settings (assistant/turn/limits.py), the model, or a crash.
        MAX_MODEL_CALLS = "max_model_calls"
        MAX_TOOL_CALLS = "max_tool_calls"
        MAX_TOKENS = "max_tokens"
        # Its token limit was what was left of the person's allowance (assistant/runs/allowances.py).
        ALLOWANCE = "allowance"
        REPEATED_TOOL_CALL = "repeated_tool_call"
        MODEL_ERROR = "model_error"
        INTERNAL_ERROR = "internal_error"
        # `timed_out`: over its working time, or found still running well past it by the sweep.
        WALL_TIME = "wall_time"
        SWEPT = "swept"
        # `cancelled`: the person stopped it, sent a new message instead of answering, or was signed out.
        CANCELLED = "cancelled"
        SUPERSEDED = "superseded"
        SESSION_ENDED = "session_ended"
        # `cancelled`, a call of the person's own agent (assistant/mcp/): its approval was not taken up in
        # time, or its access token was revoked while it waited.
        EXPIRED = "expired"
        TOKEN_REVOKED = "token_revoked"  # noqa: S105  (a stop reason, not a secret)

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.AWAITING_CONFIRMATION, Status.AWAITING_MEMBERS)
    ENDED_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT)
    # Runs that wait and hold no worker: a person's answer, or their members' (they end at once when stopped).
    WAITING_STATUSES = (Status.AWAITING_CONFIRMATION, Status.AWAITING_MEMBERS)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_runs")
    chat = models.ForeignKey(AgentChat, on_delete=models.CASCADE, related_name="runs")
    spec = models.CharField(max_length=100, default="default")
    # A run that another run handed work to (a member of the society, assistant/society/) is that run's
    # child: it knows its parent, the top run of its tree (null on the top run itself) and how deep it is.
    # Its question is `task`, what the parent wrote for it, not a message of the chat: a child sees only
    # that. The top run is the one the person's message started, the chat's one active run.
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="children")
    root = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="descendants")
    depth = models.PositiveSmallIntegerField(default=0, help_text="0 for a top run, 1 for its children, …")
    task = models.TextField(blank=True)
    # Where the run was asked from (assistant/channel_policies.py): `mcp` runs are one call of the person's own
    # agent, made with the access token named here (its id kept as a number: the tokens' app is optional).
    channel = models.CharField(max_length=MAX_VALUE_CHARS, choices=channel_choices, default=PANEL.value)
    client_name = models.CharField(max_length=100, blank=True, help_text="The access token's name, for an MCP run.")
    client_token_id = models.BigIntegerField(null=True, blank=True, editable=False)
    # The parent's step that asked this member (its `ask_<member>` tool call): where its steps belong.
    asked_in = models.ForeignKey("AgentStep", on_delete=models.SET_NULL, null=True, blank=True,
                                 related_name="members_asked")
    # A handoff (assistant/turn/handoff.py): the member's run whose answer is this run's reply, word for word —
    # the one that wrote it, however many members handed it on.
    answered_by = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # The person's message this run answers again (Regenerate): its answer is a branch beside the earlier ones.
    # Null for a run opened by a message of its own (that message's `run`) and for a member's run.
    answers_again = models.ForeignKey("AgentMessage", on_delete=models.SET_NULL, null=True, blank=True,
                                      related_name="answered_again_by")
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.QUEUED)
    reply = models.TextField(blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    total_tokens = models.PositiveIntegerField(default=0)
    # What its own model calls cost, in the CURRENCY setting (assistant/llm/prices.py); null when none of them had
    # a price. A member's run keeps its own: a tree's cost is the sum of its runs'.
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    model_calls = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    tool_errors = models.PositiveIntegerField(default=0)
    intent = models.CharField(max_length=100, blank=True)
    # The person's feedback on the answer: 1.0 thumbs up, 0.0 thumbs down, null none (or cleared).
    quality_score = models.FloatField(null=True, blank=True)
    feedback_comment = models.TextField(blank=True)
    feedback_at = models.DateTimeField(null=True, blank=True)
    # Why the run ended when it did not simply answer: a limit, a model error, a cancel, a crash.
    stop_reason = models.CharField(max_length=40, blank=True)
    # The settings the run was started with (model, limits, embedder, tool scope): a run obeys the
    # configuration it was queued under, whichever worker picks it up.
    config = models.JSONField(default=dict, blank=True)
    # Text written by anyone but the person that this run has read (assistant/tools/provenance.py): who wrote
    # it and where it was read, the step that read it. Not empty: the run asks the person before any effect.
    others_text = models.JSONField(default=list, db_default=[], blank=True)
    cancel_requested = models.BooleanField(default=False)
    # The worker holding the run: it renews the lease while alive; an expired lease means it died.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="How many times a worker took the run up.")
    # Where the message was sent from (assistant/access/authority.py): the run's tool calls are requests made with
    # this browser session, from this address and page origin, and the run stops when the session ends.
    # The session key signs its person in, so it is never stored in clear (assistant/access/session_keys.py): a
    # keyed digest to look the session's runs up by, and the key sealed for the worker, which only the
    # server opens and which is dropped when the run ends. Both empty for a run started by code that names
    # its user explicitly. Not editable: no admin form ever shows them.
    session_digest = models.CharField(max_length=64, blank=True, default="", editable=False)
    session_sealed = models.BinaryField(blank=True, default=b"", editable=False)
    client_address = models.GenericIPAddressField(null=True, blank=True)
    client_origin = models.CharField(max_length=300, blank=True)
    # When a sweep last put the run back on the queue: at most once per lease period, however many
    # workers sweep (assistant/turn/sweeper.py).
    requeued_at = models.DateTimeField(null=True, blank=True)
    # When the run's entry went into its owner's profile (registry): set in the transaction that ends the
    # run, so a run counts once however it ends. Empty on an ended run only when that write failed; the
    # sweeper then records it (assistant/turn/sweeper.py).
    profile_recorded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # The wall-time limit counts from here: the first start, or the user's answer to a confirmation
    # (time spent waiting for a person is not the assistant's working time).
    clock_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    objects = ChatPartQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="run_owner_recent"),
            models.Index(fields=["chat", "-created_at"], name="run_chat_recent"),
            models.Index(fields=["status", "created_at"], name="run_status_age"),
            # A token's recent calls: its rate limit, and the call waiting for approval that a retry takes up.
            models.Index(fields=["client_token_id", "-created_at"], name="run_client_token_recent",
                         condition=Q(client_token_id__isnull=False)),
            # A session that ends looks up its runs that still may act.
            models.Index(fields=["session_digest"], name="run_active_session_digest",
                         condition=Q(status__in=["queued", "running", "awaiting_confirmation", "awaiting_members"])),
            # Ended runs whose profile entry could not be written: the sweeper's to record (normally none).
            models.Index(fields=["id"], name="run_profile_unrecorded",
                         condition=Q(profile_recorded_at__isnull=True)
                         & ~Q(status__in=["queued", "running", "awaiting_confirmation", "awaiting_members"])),
        ]
        constraints = [
            # At most one active run per chat, enforced by the database, not by hope.
            # Children work for their top run, in its chat, and are not counted against it; nor are the
            # calls of the person's own agent, which may make several at once (each is a run of its own).
            models.UniqueConstraint(
                fields=["chat"],
                condition=Q(status__in=["queued", "running", "awaiting_confirmation", "awaiting_members"],
                            parent__isnull=True, channel="panel"),
                name="one_active_run_per_chat",
            ),
            # A child's depth follows from its parent's: 0 exactly for a run with none.
            models.CheckConstraint(
                condition=Q(parent__isnull=True, root__isnull=True, depth=0)
                | Q(parent__isnull=False, root__isnull=False, depth__gt=0),
                name="run_tree_shape",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    @property
    def routed_from(self) -> str:
        """The spec this run was asked as, when a plain request routed it to a member (the run then became that
        member's, assistant/society/routing.py); "" for any other run."""
        routed = (self.config or {}).get("routed")
        return str(routed.get("from") or "") if isinstance(routed, dict) else ""

    def setting(self, key: str) -> Any:
        """A setting as the run keeps it (its `config`, from `lifecycle.run_config`), or the default for a key
        the run predates."""
        return (self.config or {}).get(key.lower(), DEFAULTS[key])


class AgentStep(models.Model):
    """One model call, tool call or notice inside a run, written as it happens."""

    class Kind(models.TextChoices):
        MODEL_CALL = "model_call"
        TOOL_CALL = "tool_call"
        NOTICE = "notice"

    class State(models.TextChoices):
        STARTED = "started"
        FINISHED = "finished"
        AWAITING_CONFIRMATION = "awaiting_confirmation"

    class Confirmation(models.TextChoices):
        APPROVED = "approved"
        DENIED = "denied"

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="steps")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    state = models.CharField(max_length=32, choices=State.choices, default=State.FINISHED)
    tool_name = models.CharField(max_length=200, blank=True)
    call_id = models.CharField(
        max_length=200, blank=True,
        help_text="The tool call's id, unique in its run: the model's own when it was one, else made by the server.",
    )
    confirmation = models.CharField(max_length=16, choices=Confirmation.choices, blank=True)
    arguments = models.JSONField(default=dict, blank=True)
    # What the model asked for, when the person changed the arguments before approving the step (its
    # `arguments` are then what they approved, and what ran); null when nobody changed them.
    asked_arguments = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    took_effect = models.BooleanField(null=True, blank=True)
    reason = models.TextField(blank=True)
    summary = models.TextField(
        blank=True,
        help_text="For a tool call that asks the person first: what it will do, in words, naming objects as they "
        "see them (set when the step starts waiting).",
    )
    containment = models.JSONField(
        null=True, blank=True,
        help_text="For a write that asks the person because the run read text someone else wrote: why, in words, "
        "and whose text it read (set when the step starts waiting).",
    )
    card = models.TextField(
        blank=True,
        help_text="For a tool call whose tool declares a card: the object it acted on or showed, drawn by the app's "
        "own template as the person could see it then, sanitised (assistant/tools/cards.py).",
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # Of a model call's prompt tokens, those the provider read from its cache (priced lower).
    cached_tokens = models.PositiveIntegerField(default=0)
    # What a model call cost, by the PRICES setting when it was made; null when its model had no price.
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = StepQuerySet.as_manager()

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="step_run_seq_unique"),
            # One step per tool call: what a person approves, and what runs, is that call and no other.
            models.UniqueConstraint(
                fields=["run", "call_id"], condition=Q(kind="tool_call") & ~Q(call_id=""), name="step_one_per_tool_call"
            ),
        ]

    # The outcome of a tool call whose run ended before it ran (stopped, signed out, superseded): the
    # person was asked and had not answered, or approved and the run never got to it.
    NOT_RUN = "not_run"
    # The outcome of a delegation whose run ended before its member answered (assistant/society/).
    MEMBER_STOPPED = "member_stopped"
    # Tool outcomes that count as errors in a run's and a profile's figures: the tool did not do what
    # the model asked (a declined action is the person's choice, but still not what was asked).
    # A member that could not go on (`escalated`) or could not be asked (`refused`) is one too.
    FAILED_OUTCOMES = frozenset({"invalid", "denied", "not_found", "error", "unknown", "declined", NOT_RUN,
                                 MEMBER_STOPPED, "escalated", "refused"})

    def __str__(self) -> str:
        label = self.tool_name or self.kind
        return f"#{self.seq} {label}"

    @property
    def failed(self) -> bool:
        return self.kind == self.Kind.TOOL_CALL and (self.result or {}).get("status") in self.FAILED_OUTCOMES


def step_counts(steps: Iterable[AgentStep]) -> dict[str, Any]:
    """A run's counters as its steps give them: model calls, tool calls, failed tool calls and tokens. A run
    is closed with these; staff see them counted the same way while it is still active."""
    steps = list(steps)
    tool_steps = [step for step in steps if step.kind == AgentStep.Kind.TOOL_CALL]
    return {
        "model_calls": sum(1 for step in steps if step.kind == AgentStep.Kind.MODEL_CALL),
        "tool_calls": len(tool_steps),
        "tool_errors": sum(1 for step in tool_steps if step.failed),
        "prompt_tokens": sum(step.prompt_tokens for step in steps),
        "completion_tokens": sum(step.completion_tokens for step in steps),
        # The sum of the costs known; None when no step had a price.
        "cost": sum(costs, Decimal(0)) if (costs := [step.cost for step in steps if step.cost is not None]) else None,
    }


class AgentPlan(models.Model):
    """One revision of a run's plan (assistant/plans/): what the run means to do, step by step, in words.

    A run that plans writes revision 1 before it acts; a step that fails makes it plan again, and each new
    plan is a new row (the steps already done carried over as they were). The newest revision is the plan
    the run follows: its steps' statuses change as the run works, and every step has a final status once
    the run has ended. Evidence, like the run's steps: staff read it, nobody edits it."""

    class Status(models.TextChoices):
        PENDING = "pending"
        IN_PROGRESS = "in_progress"
        DONE = "done"
        FAILED = "failed"
        SKIPPED = "skipped"

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="plans")
    revision = models.PositiveIntegerField()
    # [{"n", "do", "tool", "member", "member_note", "status", "step_ids", "why"}], in order (see plans.record).
    steps = models.JSONField(default=list)
    # Why this revision was made: empty for the first; the failure (or the person's comment) that led to it.
    reason = models.TextField(blank=True)
    # The run's tool step that wrote it (the model's call of the planning tool). A plan the person must approve
    # first waits on that step, as any tool call that asks first does: an answer names the step it answers,
    # so an approval of an older revision (another step) is refused.
    made_in = models.ForeignKey(AgentStep, on_delete=models.SET_NULL, null=True, blank=True, related_name="plans")

    class Approval(models.TextChoices):
        NOT_ASKED = "", "not asked"
        WAITING = "waiting"
        APPROVED = "approved"
        DENIED = "denied"
        COMMENTED = "commented"  # not approved: the person said what to change instead

    approval = models.CharField(max_length=16, choices=Approval.choices, blank=True)
    comment = models.TextField(blank=True, help_text="What the person asked to change, answering instead of approving.")
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = StepQuerySet.as_manager()

    class Meta:
        ordering = ["run", "revision"]
        constraints = [models.UniqueConstraint(fields=["run", "revision"], name="plan_run_revision_unique")]

    def __str__(self) -> str:
        return f"Plan of run {self.run_id}, revision {self.revision}"


def _attachment_path(attachment: AgentAttachment, filename: str) -> str:
    # A random folder per file: its address says nothing of whose it is or what it is called.
    return f"assistant/attachments/{uuid.uuid4().hex}/{filename}"


class AgentAttachment(models.Model):
    """A file the person gave the assistant (assistant/attachments/): theirs alone, sent with one of their messages.

    Uploaded before it is sent (`message` empty until then); sent, it belongs to that message and its chat. Its
    content goes when the chat is deleted or the evidence pruned; the row (its name, type and size) stays with the
    chat's other evidence for staff."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_attachments")
    message = models.ForeignKey(AgentMessage, on_delete=models.CASCADE, null=True, blank=True,
                                related_name="attachments")
    file = models.FileField(upload_to=_attachment_path, max_length=300, blank=True)
    # The name the person's file had (made safe to show), its type as the content says, and its size in bytes.
    name = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    # When its content was deleted (its chat deleted by its person, or pruned): the row is what is left.
    removed_at = models.DateTimeField(null=True, blank=True)

    objects = AttachmentQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="attachment_owner_recent")]

    def __str__(self) -> str:
        return self.name


class AgentMemory(models.Model):
    """Something the assistant remembers for one owner. The vector column has no fixed dimension,
    so embedders of different sizes can coexist; only rows of the same `embedder` (and `dims`) are
    ever compared."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_memories")
    spec = models.CharField(max_length=100, default="default")
    content = models.TextField()
    embedding = VectorField()
    dims = models.PositiveIntegerField()
    embedder = models.CharField(max_length=200)
    # Text by others the run that saved it had read: a run that recalls it has read it too.
    others_text = models.JSONField(default=list, db_default=[], blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "agent memories"
        # Recall's exact scan reads exactly one group's rows through this index; an owner with many rows
        # gets an HNSW index of their own as well (assistant.memory.store).
        indexes = [models.Index(fields=["owner", "spec", "embedder", "dims"], name="memory_recall_group")]
        constraints = [
            # Recall casts `embedding` to vector(dims), and an owner's index does on insert: a row whose
            # dims lied would fail every later write and recall of its owner.
            models.CheckConstraint(
                condition=models.Q(dims=models.Func("embedding", function="vector_dims",
                                                    output_field=models.IntegerField())),
                name="memory_dims_match_embedding",
            ),
        ]

    def __str__(self) -> str:
        return self.content[:80]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.embedding is not None:
            self.dims = len(self.embedding)
        super().save(*args, **kwargs)


class AgentAllowance(models.Model):
    """What one person, or each member of a group, may spend on the assistant's models: tokens and money
    (in the CURRENCY setting), per day and per month, each left empty for no limit. Staff set them in the
    admin; a run is given no more than is left (assistant/runs/allowances.py). A person's own allowance
    is theirs whatever their groups say; without one, each limit is the most generous of their groups'."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="agent_allowance", help_text="The person it is for, or…")
    group = models.OneToOneField("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="agent_allowance", help_text="…the group each of whose members it is "
                                 "for (a person's own allowance wins over their groups').")
    tokens_per_day = models.PositiveBigIntegerField(null=True, blank=True,
                                                    help_text="Tokens a day, counted from midnight; empty: no limit.")
    tokens_per_month = models.PositiveBigIntegerField(null=True, blank=True,
                                                      help_text="Tokens a month, from the 1st; empty: no limit.")
    cost_per_day = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True,
                                       help_text="Money a day, by the PRICES setting; empty: no limit.")
    cost_per_month = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True,
                                         help_text="Money a month, by the PRICES setting; empty: no limit.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["group__name", "user__username"]
        constraints = [
            models.CheckConstraint(condition=Q(user__isnull=False, group__isnull=True)
                                   | Q(user__isnull=True, group__isnull=False), name="allowance_for_one_holder"),
        ]

    def __str__(self) -> str:
        return f"Allowance of {self.user}" if self.user_id else f"Allowance of the group {self.group}"
