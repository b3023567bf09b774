"""The runs' dashboard in Chromium, as staff read it: nothing serious for axe-core in its page, and a bar of its
chart opens the run list filtered to exactly the runs behind it. (Its figures, against the runs a test made, are
tests/review/test_dashboard.py's.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from assistant.models import AgentPlan, AgentRun
from tests.browser.harness import BROWSER_MARKS, axe_violations, describe_violations, screenshot
from tests.review.test_dashboard import DASHBOARD, TODAY, day, make_run

pytestmark = BROWSER_MARKS


@pytest.fixture
def fortnight(alice: Any, bob: Any) -> None:
    """A fortnight as a busy site has one: a few runs to a dozen a day, mostly answered, some failing,
    timing out or cancelled, with tool calls, tokens and feedback."""
    tools = ("tracker_task_list", "tracker_task_create", "tracker_task_done", "tracker_project_delete")
    outcomes = ("data", "done", "done", "invalid", "done", "denied", "data", "error")
    for offset in range(14):
        for number in range(3 + (offset * 5) % 11):
            serial = offset * 13 + number
            status, stop, error = "succeeded", "", ""
            if serial % 9 == 0:
                status, stop, error = "failed", "model_error", "the model provider answered 503"
            elif serial % 17 == 0:
                status, stop = "timed_out", "wall_time"
            elif serial % 23 == 0:
                status, stop = "cancelled", "cancelled"
            run = make_run(alice if serial % 2 else bob, on=day(offset), status=status, stop_reason=stop,
                           error=error, duration_ms=800 + (serial * 379) % 9000, tokens=400 + (serial * 97) % 2500,
                           quality=(1.0, None, 0.0, None, 1.0)[serial % 5],
                           tools=tuple((tools[(serial + n) % 4], outcomes[(serial + n) % 8])
                                       for n in range(serial % 4)))
            if serial % 3 == 0:  # a plan of two members' steps, revised now and then
                for revision in range(1, 2 + serial % 2):
                    AgentPlan.objects.create(run=run, revision=revision, steps=[
                        {"n": n, "do": f"Ask {member}", "tool": f"ask_{member}", "member": member, "member_note": "",
                         "status": ("done", "failed", "done", "skipped")[(serial // 3 + n) % 4], "step_ids": [],
                         "why": ""}
                        for n, member in enumerate(("reader", "writer"), start=1)])


def test_staff_read_the_dashboard_in_a_browser(chromium: Any, live_server: Any, fortnight: None,
                                               user_factory: Callable[..., Any]) -> None:
    user_factory("reviewer", is_staff=True, is_superuser=True)
    context = chromium.start().new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    try:
        tab.goto(live_server.url + DASHBOARD)
        tab.fill("#id_username", "reviewer")
        tab.fill("#id_password", "pw")
        tab.click("input[type=submit]")
        tab.wait_for_selector("svg.dashboard-chart")
        violations = axe_violations(tab, "#content")
        assert not violations, describe_violations(violations)
        screenshot(tab, "admin-dashboard", full_page=True)
        # A bar is a link: today's succeeded runs open in the run list.
        today = f'[href*="created_at__gte={TODAY.isoformat()}"]'
        bar = tab.locator(f'svg.dashboard-chart-links a[href*="status=succeeded"]{today}')
        assert bar.count() == 1
        bar.click()
        tab.wait_for_url(re.compile(r".*/admin/assistant/agentrun/\?.*"))
        expected = AgentRun.objects.filter(status="succeeded", created_at__date=TODAY).count()
        assert expected > 0
        assert tab.locator("#result_list tbody tr").count() == expected
    finally:
        context.close()
