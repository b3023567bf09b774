"""Writes to agent profiles."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db import transaction
from django.utils import timezone

from registry.models import WINDOW_SIZE, AgentProfile
from registry.stats import QUALITY_JUDGE, QUALITY_THUMBS, quality_source

STATUSES = ("success", "error", "timeout", "cancelled")


def _owner_id(owner: Any) -> Any:
    return getattr(owner, "pk", owner)


def _locked_profile(owner_id: Any, spec_name: str) -> AgentProfile:
    """The profile's row, locked until the transaction ends; made on first use. One query when it exists."""
    profile = AgentProfile.objects.select_for_update().filter(owner_id=owner_id, spec_name=spec_name).first()
    if profile is None:
        # Two first recordings may race to make it: the unique constraint lets one in, and both then lock it.
        AgentProfile.objects.get_or_create(owner_id=owner_id, spec_name=spec_name)
        profile = AgentProfile.objects.select_for_update().get(owner_id=owner_id, spec_name=spec_name)
    return profile


@transaction.atomic
def profile_record_invocation(*, owner: Any, spec_name: str, entry: dict[str, Any]) -> AgentProfile:
    """Append one invocation to the profile of `owner` (a user, a user id, or None for the organisation)
    for `spec_name`, keeping the last WINDOW_SIZE entries.

    The row is locked for the update, so runs finishing at the same moment never lose each other's entry,
    and the entry's `timestamp` is taken once the lock is held: the window is in time order. An entry whose
    `run_id` is in the window already is not added again. Tool counts are per call: `tools_used` names
    each call's tool (repeated when called again), `failed_tools` each failed call's.
    """
    if entry.get("status") not in STATUSES:
        raise ValueError(f"Invocation status must be one of {', '.join(STATUSES)}, not {entry.get('status')!r}.")
    profile = _locked_profile(_owner_id(owner), spec_name)
    run_id = entry.get("run_id")
    if run_id is not None and any(recorded.get("run_id") == run_id for recorded in profile.window):
        return profile
    now = timezone.now()
    entry = {**entry, "timestamp": now.isoformat()}
    profile.window = [*profile.window, entry][-WINDOW_SIZE:]
    profile.invocations += 1
    profile.first_seen = profile.first_seen or now
    profile.last_seen = now
    calls, failures = Counter(entry.get("tools_used") or []), Counter(entry.get("failed_tools") or [])
    for name in calls.keys() | failures.keys():
        usage = profile.tool_usage.setdefault(name, {"success": 0, "failure": 0})
        usage["success"] += max(calls[name] - failures[name], 0)
        usage["failure"] += failures[name]
    if entry.get("intent"):
        profile.intent_affinity[entry["intent"]] = profile.intent_affinity.get(entry["intent"], 0) + 1
    profile.save(update_fields=["window", "invocations", "first_seen", "last_seen", "tool_usage", "intent_affinity"])
    return profile


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
