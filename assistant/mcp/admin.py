"""Staff see and revoke access tokens here; nobody adds one or changes one (a token is made by its person,
on their page or with `manage.py assistant_token`), and no page shows a token's hash or its person's
password fingerprint. The list takes only the lookups its filters name, as the assistant's other lists."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import tokens_revoke
from registry.admin_queries import StrictAdminQueryMixin

SHOWN_FIELDS = ("owner", "name", "display_prefix", "spec", "read_only", "state_words", "created_at", "last_used_at",
                "expires_at", "revoked_at")


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "Active"), ("expired", "Expired"), ("revoked", "Revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> QuerySet[AccessToken]:
        value, now = self.value(), timezone.now()
        if value is None:
            return queryset
        if value == "live":
            return queryset.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), revoked_at__isnull=True)
        if value == "expired":
            return queryset.filter(expires_at__lte=now, revoked_at__isnull=True)
        if value == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        raise IncorrectLookupParameters(f"“{value}” is not a token's state (live, expired, revoked)")


@admin.register(AccessToken)
class AccessTokenAdmin(StrictAdminQueryMixin, admin.ModelAdmin):
    list_display = ("name", "owner", "display_prefix", "spec", "read_only", "state_words", "created_at",
                    "last_used_at", "expires_at")
    list_filter = (StateFilter, "spec", "read_only")
    allowed_lookups = frozenset({"state", "spec", "spec__isnull", "read_only__exact", "read_only__isnull",
                                 "owner__id__exact"})
    search_fields = ("name", "prefix", "owner__username")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    fields = SHOWN_FIELDS
    readonly_fields = SHOWN_FIELDS
    actions = ["revoke_selected"]

    @admin.display(description="token")
    def display_prefix(self, token: AccessToken) -> str:
        return token.display_prefix

    @admin.display(description="state")
    def state_words(self, token: AccessToken) -> str:
        return {"live": "active", "expired": "expired", "revoked": "revoked"}[token.state()]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only pages; revoking is the action below

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("assistant_mcp.change_accesstoken"))

    @admin.action(description="Revoke the selected tokens", permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> None:
        revoked = tokens_revoke(tokens=queryset)
        already = queryset.count() - revoked
        text = f"Revoked {revoked} token{'' if revoked == 1 else 's'}."
        if already:
            text += f" {already} {'was' if already == 1 else 'were'} already revoked."
        self.message_user(request, text, messages.SUCCESS)
