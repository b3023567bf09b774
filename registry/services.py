"""Writes to agent profiles."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from registry.models import WINDOW_SIZE, AgentProfile
from registry.stats import QUALITY_JUDGE, QUALITY_THUMBS, quality_source

STATUSES = ("success", "error", "timeout", "cancelled")


def _owner_id(owner: Any) -> Any:
    return getattr(owner, "pk", owner)


# A timestamp as Python's isoformat() writes one in UTC, always with microseconds: the window's entries compare
# as text (registry/ranking.py), and these sort among those as the times they name.
_ISO_UTC = """to_char(({moment}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '+00:00'"""
# Never before the newest entry: runs that end at the same moment, whichever gets the row first, keep the
# window in time order.
_MOMENT = "GREATEST(%(now)s, profile.last_seen)"


@cache
def _record_sql() -> str:
    """One statement files an entry: the profile's row is made on first use, or else locked and updated,
    the window appended to and cut to its size, the counts added to, in the database (the window is never
    read into Python and written back whole). Nothing is written when the run's entry is there already.
    Counts that are not an object (a hand-edited row) are not added to: they become NULL, which their
    columns refuse, so the statement fails as a write of bad data does."""
    table = AgentProfile._meta.db_table
    # Not the window and the counts: the row comes back without them (deferred, read if asked for), so the
    # 100 entries never travel back to be parsed for nothing.
    returned = ", ".join(f'profile."{field.column}"' for field in AgentProfile._meta.concrete_fields
                         if not isinstance(field, models.JSONField))

    def stamped(moment: str) -> str:
        return f"%(entry)s::jsonb || jsonb_build_object('timestamp', {_ISO_UTC.format(moment=moment)})"

    def added(count: str) -> str:
        return (f"COALESCE((profile.tool_usage -> delta.key ->> '{count}')::bigint, 0) "
                f"+ (delta.value ->> '{count}')::bigint")

    return f"""
        INSERT INTO "{table}" AS profile (owner_id, spec_name, first_seen, last_seen, invocations, "window", tool_usage,
                                          intent_affinity, notes)
        VALUES (%(owner)s, %(spec)s, %(now)s, %(now)s, 1,
                jsonb_build_array({stamped("%(now)s")}),
                %(tool_usage)s::jsonb, %(intent_affinity)s::jsonb, '')
        ON CONFLICT ON CONSTRAINT profile_owner_spec_unique DO UPDATE SET
            "window" = jsonb_path_query_array(
                profile."window" || jsonb_build_array({stamped(_MOMENT)}), '$[$start to last]',
                jsonb_build_object('start', GREATEST(jsonb_array_length(profile."window") + 1 - %(size)s, 0))),
            invocations = profile.invocations + 1,
            first_seen = COALESCE(profile.first_seen, {_MOMENT}),
            last_seen = {_MOMENT},
            tool_usage = CASE WHEN %(tool_usage)s::jsonb = '{{}}'::jsonb THEN profile.tool_usage
                WHEN jsonb_typeof(profile.tool_usage) = 'object' THEN profile.tool_usage || (
                    SELECT jsonb_object_agg(delta.key, COALESCE(profile.tool_usage -> delta.key, '{{}}'::jsonb)
                        || jsonb_build_object('success', {added("success")}, 'failure', {added("failure")}))
                    FROM jsonb_each(%(tool_usage)s::jsonb) AS delta)
                END,
            intent_affinity = CASE WHEN %(intent)s::text IS NULL THEN profile.intent_affinity
                WHEN jsonb_typeof(profile.intent_affinity) = 'object' THEN profile.intent_affinity
                    || jsonb_build_object(%(intent)s::text,
                                          COALESCE((profile.intent_affinity ->> %(intent)s::text)::bigint, 0) + 1)
                END
        WHERE %(run_id)s::bigint IS NULL
            OR NOT profile."window" @> jsonb_build_array(jsonb_build_object('run_id', %(run_id)s::bigint))
        RETURNING {returned}
    """  # noqa: S608 (identifiers from the model's metadata; every value is a parameter)


@transaction.atomic
def profile_record_invocation(*, owner: Any, spec_name: str, entry: dict[str, Any]) -> AgentProfile:
    """Append one invocation to the profile of `owner` (a user, a user id, or None for the organisation)
    for `spec_name`, keeping the last WINDOW_SIZE entries.

    One statement, which locks the row for its update, so runs finishing at the same moment never lose each
    other's entry; the entry's `timestamp` is never earlier than the newest one's, so the window is in time
    order. An entry whose `run_id` is in the window already is not added again. Tool counts are per call:
    `tools_used` names each call's tool (repeated when called again), `failed_tools` each failed call's.
    """
    if entry.get("status") not in STATUSES:
        raise ValueError(f"Invocation status must be one of {', '.join(STATUSES)}, not {entry.get('status')!r}.")
    calls, failures = Counter(entry.get("tools_used") or []), Counter(entry.get("failed_tools") or [])
    usage = {name: {"success": max(calls[name] - failures[name], 0), "failure": failures[name]}
             for name in calls.keys() | failures.keys()}
    intent = entry.get("intent") or None
    owner_id = _owner_id(owner)
    recorded = next(iter(AgentProfile.objects.raw(_record_sql(), {
        "owner": owner_id, "spec": spec_name, "now": timezone.now(), "size": WINDOW_SIZE,
        "entry": json.dumps(entry), "tool_usage": json.dumps(usage),
        "intent_affinity": json.dumps({intent: 1} if intent else {}), "intent": intent, "run_id": entry.get("run_id"),
    })), None)
    if recorded is None:  # the run's entry was there already
        return AgentProfile.objects.get(owner_id=owner_id, spec_name=spec_name)
    return recorded


def _locked_entry(owner: Any, spec_name: str, run_id: int) -> tuple[AgentProfile | None, dict[str, Any] | None]:
    """The profile's row, locked, and run `run_id`'s entry in its window (None, None when either is missing)."""
    profile = AgentProfile.objects.select_for_update().filter(owner_id=_owner_id(owner), spec_name=spec_name).first()
    if profile is None:
        return None, None
    entry = next((entry for entry in profile.window if entry.get("run_id") == run_id), None)
    return profile, entry


def _score(value: float) -> float:
    score = float(value)
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"A quality score is from 0 to 1, not {value!r}.")
    return score


@transaction.atomic
def profile_entry_score(*, owner: Any, spec_name: str, run_id: int, quality_score: float | None) -> bool:
    """The person's feedback on run `run_id` reached its entry: its quality is their thumbs (0–1, source
    "thumbs"), whatever a judge said; or, taken back (None), the judge's grade again if one was kept, else
    none. The row is locked, so feedback racing a new recording or a judge loses neither.
    False, and nothing changed, when the run is no longer (or not) in the window."""
    profile, entry = _locked_entry(owner, spec_name, run_id)
    if profile is None or entry is None:
        return False
    if quality_score is not None:
        entry["quality_score"], entry["quality_source"] = _score(quality_score), QUALITY_THUMBS
    elif entry.get("judge_score") is not None:
        entry["quality_score"], entry["quality_source"] = float(entry["judge_score"]), QUALITY_JUDGE
    else:
        entry.pop("quality_score", None)
        entry.pop("quality_source", None)
    profile.save(update_fields=["window"])
    return True


@transaction.atomic
def profile_entry_judge(*, owner: Any, spec_name: str, run_id: int, score: float, eval_run_id: int | None = None
                        ) -> bool:
    """A judge graded run `run_id`'s recording (0–1) in eval run `eval_run_id`: the entry keeps the grade as
    `judge_score` (the latest judge's, replacing an earlier one: a run is one entry however often it is
    judged), and it is the entry's quality (source "judge") unless the person gave thumbs, which always win.
    False, and nothing changed, when the run is no longer (or not) in the window."""
    score = _score(score)
    profile, entry = _locked_entry(owner, spec_name, run_id)
    if profile is None or entry is None:
        return False
    entry["judge_score"], entry["judged_in"] = score, eval_run_id
    if quality_source(entry) != QUALITY_THUMBS:
        entry["quality_score"], entry["quality_source"] = score, QUALITY_JUDGE
    profile.save(update_fields=["window"])
    return True
