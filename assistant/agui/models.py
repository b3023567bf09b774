"""Which AG-UI thread and run of a person's frontend is which chat and run of theirs.

An AG-UI client names its conversation (`threadId`) and each run in it (`runId`) itself. A thread's first
run makes a chat of the person's (channel `panel`: see docs/ag-ui.md, "Channel"), and every `runId` the
client sends is one row here, naming the top run it follows: the run its message started, or the run it resumed
after an interrupt, or the run it re-attached to. A `runId` is the person's once: posted again, it re-attaches
to its run instead of starting another."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from assistant.models import OwnedQuerySet

#: The longest `threadId` / `runId` / message id kept (the protocol sets none; clients send UUIDs).
ID_MAX = 200


class AguiRunQuerySet(OwnedQuerySet):
    """A person's rows, and never those of a chat they deleted (its runs are gone for them too)."""

    deleted_path = "chat__deleted_at"
    channel_path = "chat__channel"


class AguiRun(models.Model):
    class Kind(models.TextChoices):
        STARTED = "started", "started by a message"
        RESUMED = "resumed", "resumed an interrupt"
        ATTACHED = "attached", "attached to a run at work"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    thread_id = models.CharField(max_length=ID_MAX, help_text="The client's threadId.")
    run_id = models.CharField(max_length=ID_MAX, help_text="The client's runId.")
    chat = models.ForeignKey("assistant.AgentChat", on_delete=models.CASCADE, related_name="+")
    assistant_run = models.ForeignKey("assistant.AgentRun", on_delete=models.CASCADE, related_name="+",
                                      help_text="The top run this AG-UI run follows.")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    message_id = models.CharField(max_length=ID_MAX, blank=True,
                                  help_text="The client's id of the message that started the run.")
    # The access token it was asked with (its id kept as a number: the tokens' app is optional); null for
    # the person's browser session.
    token_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = AguiRunQuerySet.as_manager()

    class Meta:
        verbose_name = "AG-UI run"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "thread_id", "-created_at"], name="agui_run_thread_recent")]
        constraints = [models.UniqueConstraint(fields=["owner", "run_id"], name="agui_run_owner_run_id")]

    def __str__(self) -> str:
        return f"AG-UI run {self.run_id} (thread {self.thread_id})"
