"""Writes to agent profiles."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from registry.models import WINDOW_SIZE, AgentProfile

STATUSES = ("success", "error", "timeout", "cancelled")


@transaction.atomic
def profile_record_invocation(*, owner: Any, spec_name: str, entry: dict[str, Any]) -> AgentProfile:
    """Append one invocation to the owner's profile for `spec_name`, keeping the last WINDOW_SIZE entries.

    The row is locked for the update, so runs finishing at the same moment never lose each other's entry.
    """
    if entry.get("status") not in STATUSES:
        raise ValueError(f"Invocation status must be one of {', '.join(STATUSES)}, not {entry.get('status')!r}.")
    now = timezone.now()
    AgentProfile.objects.get_or_create(owner=owner, spec_name=spec_name, defaults={"first_seen": now})
    profile = AgentProfile.objects.select_for_update().get(owner=owner, spec_name=spec_name)
    entry = {"timestamp": now.isoformat(), **entry}
    profile.window = [*profile.window, entry][-WINDOW_SIZE:]
    profile.invocations += 1
    profile.first_seen = profile.first_seen or now
    profile.last_seen = now
    failed = entry.get("failed_tools") or []
    for name in entry.get("tools_used") or []:
        usage = profile.tool_usage.setdefault(name, {"success": 0, "failure": 0})
        usage["failure" if name in failed else "success"] += 1
    if entry.get("intent"):
        profile.intent_affinity[entry["intent"]] = profile.intent_affinity.get(entry["intent"], 0) + 1
    profile.save()
    return profile
