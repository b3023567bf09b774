"""Staff reviewing runs in Chromium: the run list fits 1,400 px beside its filters, a run's timeline reads
without anything serious for axe-core, and both leave screenshots in .data/screenshots/."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.utils import timezone

from tests.browser.harness import BROWSER_MARKS, SCREENSHOTS, axe_violations, describe_violations, log_in
from tests.review.test_admin_runs import a_run, step

pytestmark = BROWSER_MARKS


def test_staff_read_the_run_list_and_a_runs_timeline_at_1400_px(
    page: Any, site_url: str, user_factory: Callable[..., Any]
) -> None:
    user_factory("staffer", is_staff=True, is_superuser=True)
    alice = user_factory("alice")
    for number in range(6):
        a_run(alice, f"What is open in project {number}?", reply="Two tasks: *milk* and *bread*.",
              created_ago=timedelta(hours=number + 1), model="openai:gpt-4o-mini", duration_ms=1800 + number,
              total_tokens=1234 + number, model_calls=2, tool_calls=1, quality_score=1.0 if number % 2 else None,
              feedback_comment="Exactly what I asked for, and quickly too" if number % 2 else "")
    a_run(alice, "Delete everything in Home", status="failed", stop_reason="max_tool_calls",
          error="The assistant reached its limit of 20 tool calls in this run and stopped before it finished.")
    started = timezone.now() - timedelta(seconds=8)
    run = a_run(alice, "Rename Home to House and add a task “Buy milk”",
                reply="Done: **Home** is now **House**, and “Buy milk” is in it.\n\n- one thing could not be "
                      "done: the task needs a title", model="openai:gpt-4o-mini", started_at=started,
                finished_at=started + timedelta(seconds=4), duration_ms=4000, prompt_tokens=640,
                completion_tokens=52, total_tokens=692, model_calls=3, tool_calls=4, tool_errors=1,
                quality_score=1.0, feedback_comment="Good")
    step(run, 1, "model_call", at_ms=900, duration_ms=900, prompt_tokens=300, completion_tokens=20,
         result={"text": "", "tool_calls": [{"name": "tracker_project_list"}]})
    step(run, 2, "tool_call", at_ms=950, duration_ms=120, tool_name="tracker_project_list",
         arguments={"search": "Home"}, took_effect=False,
         result={"status": "data", "took_effect": False, "data": {"results": [{"id": 1, "name": "Home"}]}})
    step(run, 3, "model_call", at_ms=1900, duration_ms=800, prompt_tokens=180, completion_tokens=18,
         result={"text": "", "tool_calls": [{"name": "tracker_project_update"}, {"name": "tracker_task_create"}]})
    step(run, 4, "tool_call", at_ms=1950, duration_ms=400, tool_name="tracker_project_update",
         arguments={"pk": 1, "name": "House"}, took_effect=True, confirmation="approved",
         summary="Rename the project “Home” to “House”", result={"status": "done", "took_effect": True})
    step(run, 5, "tool_call", at_ms=2400, duration_ms=90, tool_name="tracker_task_create",
         arguments={"project": 1, "title": ""}, took_effect=False, reason="the form has errors: title is required",
         result={"status": "invalid", "took_effect": False, "reason": "the form has errors"})
    step(run, 6, "tool_call", at_ms=2500, duration_ms=60, tool_name="tracker_task_list",
         arguments={"project": 1}, took_effect=False, reason="the view answered 500",
         result={"status": "error", "took_effect": False, "reason": "the view answered 500"})
    step(run, 7, "model_call", at_ms=4000, duration_ms=1400, prompt_tokens=160, completion_tokens=14,
         result={"text": "Done: Home is now House.", "tool_calls": []})

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, site_url, "staffer")

    page.goto(site_url + "/admin/assistant/agentrun/")
    widths = page.evaluate("""() => ({
        table: document.querySelector('#result_list').getBoundingClientRect().right,
        filters: document.querySelector('#changelist-filter').getBoundingClientRect().left,
        page: document.documentElement.scrollWidth, viewport: window.innerWidth})""")
    # The table ends before the filters begin, and nothing makes the page scroll sideways.
    assert widths["table"] <= widths["filters"] and widths["page"] <= widths["viewport"], widths
    assert page.locator("text=Export these 8 runs as CSV").is_visible()
    page.screenshot(path=str(SCREENSHOTS / "admin-runs.png"), full_page=True)

    page.goto(f"{site_url}/admin/assistant/agentrun/{run.pk}/change/")
    assert page.locator("#step-5 [data-effect=no-effect]").inner_text().startswith("∅ no effect")
    assert page.locator("#step-6 [data-effect=failed]").is_visible()
    bar = page.locator("#step-7 .timeline-bar").bounding_box()
    track = page.locator("#step-7 .timeline-track").bounding_box()
    # The last model call ran from 2.6 s to 4 s of a 4 s run: its bar is on the right part of the track.
    assert bar["x"] > track["x"] + track["width"] * 0.6 and bar["x"] + bar["width"] <= track["x"] + track["width"] + 1
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    # The admin's links fade to a new colour: judge the colours the scheme settles on, not a frame mid-way.
    page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        violations = axe_violations(page, ".run-summary") + axe_violations(page, "#run-timeline")
        assert not violations, f"{scheme}: {describe_violations(violations)}"
        page.screenshot(path=str(SCREENSHOTS / f"admin-run{'-dark' if scheme == 'dark' else ''}.png"), full_page=True)


def test_staff_read_a_trees_members_under_the_steps_that_asked_them_at_1400_px(
    page: Any, site_url: str, user_factory: Callable[..., Any]
) -> None:
    from tests.review.test_admin_run_trees import ended_tree

    user_factory("staffer", is_staff=True, is_superuser=True)
    tree = ended_tree(user_factory("alice"))
    top, writer, checker = tree["top"], tree["writer"], tree["checker"]

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, site_url, "staffer")
    page.goto(f"{site_url}/admin/assistant/agentrun/{top.pk}/change/")
    # Members asked by the run are open under their steps; the one a member asked is there, folded.
    assert page.locator(f"#member-{writer.pk} .member-stop-reason").inner_text() == "stopped: max_tool_calls"
    assert page.locator(f"#run-{writer.pk}-step-3 [data-effect=no-effect]").is_visible()
    assert not page.locator(f"#run-{checker.pk}-step-1").is_visible()
    page.locator(f"#member-{checker.pk} > details > summary").click()
    assert page.locator(f"#run-{checker.pk}-step-1").is_visible()
    # A nested bar stays inside its own track, and nothing makes the page scroll sideways.
    bar = page.locator(f"#run-{checker.pk}-step-1 .timeline-bar").bounding_box()
    track = page.locator(f"#run-{checker.pk}-step-1 .timeline-track").bounding_box()
    assert track["x"] <= bar["x"] and bar["x"] + bar["width"] <= track["x"] + track["width"] + 1
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        violations = axe_violations(page, ".run-summary") + axe_violations(page, "#run-timeline")
        assert not violations, f"{scheme}: {describe_violations(violations)}"
        page.screenshot(path=str(SCREENSHOTS / f"admin-run-tree{'-dark' if scheme == 'dark' else ''}.png"),
                        full_page=True)


def test_staff_read_a_runs_plan_and_its_revisions_at_1400_px(
    page: Any, site_url: str, user_factory: Callable[..., Any]
) -> None:
    from tests.review.test_admin_plans import revised_run

    user_factory("staffer", is_staff=True, is_superuser=True)
    made = revised_run(user_factory("alice"))
    run, reader = made["run"], made["reader"]

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(page, site_url, "staffer")
    page.goto(f"{site_url}/admin/assistant/agentrun/{run.pk}/change/")
    # The plan it followed is open, the one it replaced folded; a step's link leads to the step's row.
    current = page.locator(f"#plan-{run.pk}-rev-2")
    assert current.locator("tr[data-status=failed] .effect-words").inner_text() == "failed"
    assert not page.locator(f"#plan-{run.pk}-rev-1 table").is_visible()
    current.locator("a[href='#step-6']").click()
    page.wait_for_function("location.hash === '#step-6'")
    assert page.locator("#step-6").is_visible()
    # The member's plan is in its block, open under it.
    assert page.locator(f"#member-{reader.pk} #plan-{reader.pk}-rev-1 table").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    page.locator(f"#plan-{run.pk}-rev-1 > summary").click()
    page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        violations = axe_violations(page, "#run-plan") + axe_violations(page, "#run-timeline")
        assert not violations, f"{scheme}: {describe_violations(violations)}"
        page.locator("#run-plan").screenshot(
            path=str(SCREENSHOTS / f"admin-run-plan{'-dark' if scheme == 'dark' else ''}.png"))
