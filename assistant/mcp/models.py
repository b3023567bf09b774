"""An access token: the person's own agent calling as that person, under one spec, maybe read-only.

Only a SHA-256 of the token is stored (tokens are 256 random bits, not passwords: a slow hash would buy
nothing), with a short random prefix that is no part of the secret, for telling tokens apart on a page.
`password_fingerprint` is a keyed digest of the person's password hash when the token was made, so that a
password change stops the token as Django's session auth hash stops the person's other sessions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from assistant.models import OwnedQuerySet

NAME_MAX = 100


class AccessTokenQuerySet(OwnedQuerySet):
    def live(self) -> AccessTokenQuerySet:
        """Not revoked and not expired (now)."""
        now = timezone.now()
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), revoked_at__isnull=True)


class AccessToken(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assistant_tokens")
    name = models.CharField(max_length=NAME_MAX, help_text="The person's own label for the token.")
    prefix = models.CharField(max_length=16, unique=True, help_text="Shown to tell tokens apart; not secret.")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    spec = models.CharField(max_length=100, help_text="The assistant spec the token acts under.")
    read_only = models.BooleanField(default=False, help_text="The restricted profile, whatever the spec says.")
    password_fingerprint = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The chat its calls are recorded in (channel `mcp`): made with the first call, made again if the
    # person deletes it.
    # For a token a connected app obtained through OAuth (the person signed in and consented on this site):
    # the grant it came with (django-mcpz's authorization code, by id: that app is optional). Its bearer is
    # the app's OAuth access token, refreshed by the app; this row holds the person's choices and is what
    # they see and revoke.
    oauth_grant_id = models.BigIntegerField(null=True, blank=True, unique=True, editable=False)
    # Containment on the token's calls (docs/security.md), for a person whose agent should not act on what
    # others wrote without asking: once a call has returned someone else's text, every write the token asks
    # for within MCP_CONTAINMENT_SECONDS waits for the person, on a card that says whose text it was.
    containment = models.BooleanField(
        default=False, help_text="Ask the person before any write in the window after a call returned text "
                                 "someone else wrote.")
    others_text = models.JSONField(default=list, db_default=[], blank=True, editable=False,
                                   help_text="Whose text the token's calls returned in the current window.")
    others_text_until = models.DateTimeField(null=True, blank=True, editable=False)
    chat = models.ForeignKey("assistant.AgentChat", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+", editable=False)

    objects = AccessTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "access token"
        indexes = [models.Index(fields=["owner", "-created_at"], name="accesstoken_owner_created")]
        constraints = [
            # A name says which token is which: one live (unrevoked) token of a person per name.
            models.UniqueConstraint(fields=["owner", "name"], condition=Q(revoked_at__isnull=True),
                                    name="accesstoken_owner_name_unrevoked"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def display_prefix(self) -> str:
        return f"{self.prefix}…"

    def state(self, now: Any = None) -> str:
        """`revoked`, `expired` or `live`."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (now or timezone.now()):
            return "expired"
        return "live"
