"""Reads of agent profiles."""

from __future__ import annotations

from typing import Any

from registry.models import AgentProfile
from registry.stats import ProfileStats, compute_stats, format_summary


def profile_stats(profile: AgentProfile) -> ProfileStats:
    return compute_stats(list(profile.window or []))


def profile_summary(*, owner: Any, spec_name: str) -> str:
    """The one-line summary of how `spec_name` has done for `owner`; empty when there is no history."""
    profile = AgentProfile.objects.filter(owner=owner, spec_name=spec_name).first()
    if profile is None:
        return ""
    return format_summary(spec_name, profile.invocations, profile_stats(profile))
