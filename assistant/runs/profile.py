"""A run's entry in its owner's profile (the registry): what is filed when a run ends, however it ends.

`run_finish` (assistant/runs/lifecycle.py) files it in the transaction that ends the run, so a run counts once:
a worker that dies before that commits has ended nothing and recorded nothing (the run is taken up
again), and one that dies after has done both.
"""

from __future__ import annotations

import logging
from typing import Any

from assistant.conf import assistant_settings
from assistant.models import AgentRun, AgentStep
from assistant.tools.registry import registry as tools
from registry.services import profile_record_invocation
from registry.stats import QUALITY_THUMBS

logger = logging.getLogger(__name__)

# The seed's four invocation statuses. Cancelled covers every way a person (or their session) stopped a
# run: a cancel, a superseding message, a sign-out; the run's `stop_reason` (in the entry too) says which.
PROFILE_STATUSES: dict[str, str] = {
    AgentRun.Status.SUCCEEDED: "success",
    AgentRun.Status.FAILED: "error",
    AgentRun.Status.CANCELLED: "cancelled",
    AgentRun.Status.TIMED_OUT: "timeout",
}
# A run that called no declared tool: the person talked with the assistant.
CONVERSATION = "conversation"
INTENT_MAX_CHARS = 100  # AgentRun.intent


def run_intent(steps: list[AgentStep]) -> str:
    """What the run was for, from the tools it called, in order: the first write (what the person asked to
    have done, whether or not it took effect), else the first read (what they asked to know), else
    "conversation". Names the model made up, which no tool answers to, say nothing about intent."""
    first_read = ""
    for step in steps:
        if step.kind != AgentStep.Kind.TOOL_CALL:
            continue
        definition = tools.get(step.tool_name)
        if definition is None:
            continue
        if definition.kind != "read":
            return step.tool_name[:INTENT_MAX_CHARS]
        first_read = first_read or step.tool_name
    return first_read[:INTENT_MAX_CHARS] or CONVERSATION


def run_profile_entry(run: AgentRun, steps: list[AgentStep]) -> dict[str, Any]:
    """The entry for ended `run` (its counts as `run_finish` totalled them), in the seed's shape. Tools are
    listed per call, in order: a tool called three times is named three times."""
    tool_steps = [step for step in steps if step.kind == AgentStep.Kind.TOOL_CALL]
    entry: dict[str, Any] = {
        "run_id": run.pk, "chat_id": run.chat_id, "status": PROFILE_STATUSES[run.status],
        "stop_reason": run.stop_reason or None, "duration_ms": run.duration_ms or 0,
        "tool_calls": len(tool_steps), "tool_errors": sum(1 for step in tool_steps if step.failed),
        "token_usage": run.total_tokens, "intent": run.intent or None,
        "tools_used": [step.tool_name for step in tool_steps],
        "failed_tools": [step.tool_name for step in tool_steps if step.failed],
        "error_summary": run.error[:200] or None,
    }
    if run.cost is not None:
        # What its own model calls cost, exact (as text: JSON has no decimals), in the currency of the prices.
        entry["cost"], entry["currency"] = str(run.cost), assistant_settings.CURRENCY
    if run.quality_score is not None:  # only the person's thumbs are on the run (a judge's grade is the entry's)
        entry["quality_score"], entry["quality_source"] = run.quality_score, QUALITY_THUMBS
    if run.routed_from:
        # A plain request the spec the person talks to (or a member) routed to this one: its answer is the reply.
        entry["routed_by"] = run.routed_from
        if run.parent_id is None:
            entry["handoff"] = "person"
    if run.parent_id is not None:
        # The member's record says who asked it: the spec of the run that handed it the work.
        entry["asked_by"] = (run.config or {}).get("asked_by") or AgentRun.objects.filter(
            pk=run.parent_id).values_list("spec", flat=True).first()
        if (run.config or {}).get("hands_over"):
            # Asked alone, its answer was to be its asker's reply (a handoff): to the person, when it `answers_person`.
            entry["handoff"] = "person" if run.config.get("answers_person") else "asker"
    return entry


def run_profile_record(run: AgentRun, steps: list[AgentStep]) -> bool:
    """File ended `run` in its owner's profile, inside the caller's transaction (the one that ends the run
    and sets `profile_recorded_at`). A failure here is logged and rolled back alone (a savepoint): the
    run still ends, with `profile_recorded_at` cleared, and the sweeper files it later. Returns whether
    it was filed."""
    try:
        profile_record_invocation(owner=run.owner_id, spec_name=run.spec, entry=run_profile_entry(run, steps))
    except Exception:  # the profile is for review: it must never keep a run from ending
        logger.exception("Could not record run %s in its profile; the sweeper will try again", run.pk)
        AgentRun.objects.filter(pk=run.pk).update(profile_recorded_at=None)
        run.profile_recorded_at = None
        return False
    return True
