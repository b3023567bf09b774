"""Reads for staff reviewing runs in the admin: a run as a timeline (`timeline.py`) with its plan's revisions
(`plans.py`), runs as CSV rows and lines (`export.py`), and the lists' filters (`filters.py`).

Admin-only: these read every owner's rows (the admin is the one place that does)."""

from __future__ import annotations

from assistant.review.export import CSV_COLUMNS, runs_csv_rows
from assistant.review.plans import PlanRevision, PlanStep, RunPlan, plan_status
from assistant.review.timeline import (
    Effect,
    MemberRun,
    RunFigures,
    RunTimeline,
    TimelineStep,
    TreeTotals,
    is_delegation,
    other_recent_runs,
    run_figures,
    run_timeline,
    step_effect,
    with_question,
)

__all__ = [
    "CSV_COLUMNS", "Effect", "MemberRun", "PlanRevision", "PlanStep", "RunFigures", "RunPlan", "RunTimeline",
    "TimelineStep", "TreeTotals", "is_delegation", "other_recent_runs", "plan_status", "run_figures", "run_timeline",
    "runs_csv_rows", "step_effect", "with_question",
]
