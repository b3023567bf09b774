"""htmx really swaps the tracker's regions in a browser: when `assistant:changed` is raised on <body> (as the
panel does after a step that took effect), the project list shows a project created meanwhile, without a
reload, and keeps the reader's focus and scroll position."""

from __future__ import annotations

from typing import Any

from tests.browser.harness import BROWSER_MARKS, log_in
from tracker.models import Project

pytestmark = BROWSER_MARKS

CHANGED = (
    "document.body.dispatchEvent(new CustomEvent('assistant:changed', "
    "{bubbles: true, detail: {run_id: 1, chat_id: 1, tools: ['tracker_project_create'], models: ['tracker.project']}}))"
)


def test_the_project_list_shows_a_new_project_after_assistant_changed_without_a_reload(
    page: Any, site_url: str, alice: Any
) -> None:
    # Short enough that twelve projects scroll, so that keeping the scroll position means something.
    page.set_viewport_size({"width": 1000, "height": 500})
    for number in range(12):
        Project.objects.create(owner=alice, name=f"Project {number:02d}")
    log_in(page, site_url, "alice")
    page.goto(site_url + "/tracker/")
    page.evaluate("window.notReloaded = true")
    focused = f"project-{Project.objects.get(name='Project 11').pk}-link"
    page.focus(f"#{focused}")
    page.evaluate("window.scrollTo(0, 300)")
    scrolled = page.evaluate("window.scrollY")
    assert scrolled > 0

    Project.objects.create(owner=alice, name="Project 05b")  # sorts inside the list, above the focused one
    page.evaluate(CHANGED)

    page.wait_for_selector("#projects >> text=Project 05b")
    assert page.evaluate("window.notReloaded") is True
    assert page.evaluate("document.activeElement.id") == focused
    assert abs(page.evaluate("window.scrollY") - scrolled) < 100  # one more card, not a jump to the top
    assert page.locator("#projects").count() == 1 and page.locator(".site-header").count() == 1
