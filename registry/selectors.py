"""Reads of agent profiles: the seed's `getProfile`, `listProfiles`, `getStats` and `formatProfileSummary`, and
the ranking of the members a spec may hand work to (`members_ranked`, in registry/ranking.py)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from registry.models import AgentProfile
from registry.ranking import MIN_SAMPLE, RankedMember, members_ranked
from registry.stats import ProfileStats, compute_stats, format_summary

__all__ = [
    "MIN_SAMPLE", "RankedMember", "members_ranked", "profile_get", "profile_stats", "profile_summary", "profiles_list",
]


def _owner_id(owner: Any) -> Any:
    return getattr(owner, "pk", owner)


def profile_get(*, owner: Any, spec_name: str) -> AgentProfile | None:
    """The owner's profile for `spec_name` (`owner` None: the organisation-wide one); None before its
    first recorded run. Unlike the seed's `getProfile`, nothing is made up for a missing one."""
    return AgentProfile.objects.filter(owner_id=_owner_id(owner), spec_name=spec_name).first()


def profiles_list(*, spec_name: str | None = None, owner: Any = None) -> QuerySet[AgentProfile]:
    """Every profile, or those of one spec and/or one owner (a user or a user id), by spec then owner."""
    profiles = AgentProfile.objects.select_related("owner").order_by("spec_name", "owner_id", "pk")
    if spec_name is not None:
        profiles = profiles.filter(spec_name=spec_name)
    if owner is not None:
        profiles = profiles.filter(owner_id=_owner_id(owner))
    return profiles


def profile_stats(profile: AgentProfile) -> ProfileStats:
    """The derived stats over the profile's rolling window (the seed's `getStats`)."""
    return compute_stats(list(profile.window or []))


def profile_summary(*, owner: Any, spec_name: str) -> str:
    """The one-line summary of how `spec_name` has done for `owner`, exactly as it goes into the system
    prompt; empty when there is no history."""
    profile = profile_get(owner=owner, spec_name=spec_name)
    if profile is None:
        return ""
    return format_summary(spec_name, profile.invocations, profile_stats(profile))
