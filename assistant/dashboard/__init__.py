"""The staff dashboard: how the assistant did over a date range, for one spec or all of them.

Reads are a handful of aggregate queries (by day and outcome, percentiles, tools, stop reasons, errors,
feedback, plans and their steps per member), whatever the range's length (`reads.py`); the charts are SVG
drawn on the server, with no script (`svg.py`): each has a `<title>`, `role="img"` and an `aria-label` that
says its numbers, and the page (`page.py`, served by the run admin's `dashboard/` URL) puts a table with the
same numbers, each a link to the run list filtered to the runs behind it, under every chart.
"""

from __future__ import annotations

from assistant.dashboard.page import dashboard_view, page_context, run_list_url, tool_lookups
from assistant.dashboard.reads import (
    DEFAULT_DAYS,
    MAX_DAYS,
    Dashboard,
    DashboardQuery,
    MemberSteps,
    PercentileCont,
    PlanFigures,
    ToolFigures,
    dashboard_get,
    parse_query,
    runs_in,
    specs_list,
)

__all__ = [
    "DEFAULT_DAYS", "MAX_DAYS", "Dashboard", "DashboardQuery", "MemberSteps", "PercentileCont", "PlanFigures",
    "ToolFigures", "dashboard_get",
    "dashboard_view", "page_context", "parse_query", "run_list_url", "runs_in", "specs_list", "tool_lookups",
]
