"""Reads of agent profiles: the seed's `getProfile`, `listProfiles`, `getStats` and `formatProfileSummary`, and
the ranking of the members a spec may hand work to (`members_ranked`, in registry/ranking.py)."""

from __future__ import annotations

from typing import Any

from django.db import connection
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


# What the summary line needs of the window, counted where the window is: its size, its successes (all, and in
# its later half), and its three most used tools (ties: the one used first first, as Counter.most_common has
# them). The window itself (100 entries, tens of kilobytes) never leaves the database for a turn's summary.
_SUMMARY_SQL = f"""
    WITH profile AS MATERIALIZED (
        -- The window read (and uncompressed) once, not once for each look at it below.
        SELECT invocations, "window" || '[]'::jsonb AS entries, jsonb_array_length("window") / 2 AS half
        FROM "{AgentProfile._meta.db_table}"
        WHERE owner_id IS NOT DISTINCT FROM %s AND spec_name = %s
    )
    SELECT profile.invocations, counts.size, counts.successes, counts.later_successes, top.names, top.uses
    FROM profile
    CROSS JOIN LATERAL (
        SELECT count(*) AS size,
               count(*) FILTER (WHERE entry.value ->> 'status' = 'success') AS successes,
               count(*) FILTER (WHERE entry.value ->> 'status' = 'success' AND entry.n > profile.half)
                   AS later_successes
        FROM jsonb_array_elements(profile.entries) WITH ORDINALITY AS entry(value, n)
    ) AS counts
    CROSS JOIN LATERAL (
        SELECT array_agg(used.name ORDER BY used.uses DESC, used.first) AS names,
               array_agg(used.uses ORDER BY used.uses DESC, used.first) AS uses
        FROM (
            SELECT tool.name, count(*) AS uses, min(ARRAY[entry.n, tool.m]) AS first
            FROM jsonb_array_elements(profile.entries) WITH ORDINALITY AS entry(value, n)
            CROSS JOIN LATERAL jsonb_array_elements_text(
                CASE WHEN jsonb_typeof(entry.value -> 'tools_used') = 'array' THEN entry.value -> 'tools_used'
                     ELSE '[]'::jsonb END
            ) WITH ORDINALITY AS tool(name, m)
            GROUP BY tool.name ORDER BY uses DESC, first LIMIT 3
        ) AS used
    ) AS top
"""  # noqa: S608 (the table's name from the model; every value is a parameter)


def profile_summary(*, owner: Any, spec_name: str) -> str:
    """The one-line summary of how `spec_name` has done for `owner`, exactly as it goes into the system
    prompt; empty when there is no history. The same line `format_summary` makes of `profile_stats`, from
    the few figures it uses, counted in the database."""
    with connection.cursor() as cursor:
        cursor.execute(_SUMMARY_SQL, [_owner_id(owner), spec_name])
        row = cursor.fetchone()
    if row is None:
        return ""
    invocations, size, successes, later_successes, names, uses = row
    half = size // 2
    # The same divisions as compute_stats makes: the same floats, so the same line.
    trend = later_successes / (size - half) - (successes - later_successes) / half if half else 0.0
    stats = ProfileStats(success_rate=successes / size if size else 0.0, trend=trend, sample_size=size,
                         top_tools=list(zip(names or [], uses or [], strict=True)))
    return format_summary(spec_name, invocations, stats)
