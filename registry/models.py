"""Agent profiles: the longitudinal record of how each assistant spec performs for each user."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

WINDOW_SIZE = 100


class ProfileQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> ProfileQuerySet:
        """The user's own profiles and the organisation-wide ones (owner empty)."""
        if user is None or not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(Q(owner=user) | Q(owner__isnull=True))


class AgentProfile(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agent_profiles",
        help_text="Empty for the organisation-wide profile.",
    )
    spec_name = models.CharField(max_length=100)
    first_seen = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    invocations = models.PositiveIntegerField(default=0, help_text="Lifetime count; never decays.")
    window = models.JSONField(default=list, blank=True, help_text=f"The last {WINDOW_SIZE} invocation entries.")
    tool_usage = models.JSONField(default=dict, blank=True)
    intent_affinity = models.JSONField(default=dict, blank=True)
    notes = models.TextField(blank=True)

    objects = ProfileQuerySet.as_manager()

    class Meta:
        ordering = ["spec_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "spec_name"], name="profile_owner_spec_unique", nulls_distinct=False
            )
        ]
        # The ranking's organisation-wide record reads a spec's most recently seen profiles first.
        indexes = [models.Index(fields=["spec_name", "-last_seen", "-id"], name="profile_spec_recent")]

    def __str__(self) -> str:
        who = self.owner or "organisation"
        return f"{self.spec_name} · {who}"
