"""The dock on a page of the site, in a real browser: it says what the assistant sees of the page, offers what
can be done there, and a suggestion clicked does it to that page's object, the page behind keeping up."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.harness import BROWSER_MARKS, log_in
from tests.conftest import PROJECT_DIR, WorkerProcess
from tracker.models import Project

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def site_model() -> None:
    """The site's own model answers, the offline demo model, wherever this module sits (tests/browser/'s
    conftest gives its modules a scripted one)."""
    return None


SUGGESTIONS = "#assistant-dock [data-assistant-suggestions]"


def test_on_a_project_page_the_dock_sees_the_project_and_a_suggestion_archives_it(
    page: Any, site_url: str, alice: Any, bob: Any, celery_worker: WorkerProcess
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Project.objects.create(owner=alice, name="Garden")
    log_in(page, site_url, "alice")
    page.goto(f"{site_url}/tracker/projects/{home.pk}/")
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock [data-assistant-about]:not([hidden])")
    assert page.inner_text("#assistant-dock [data-assistant-about-text]") == "About: project “Home”"
    offered = page.locator(f"{SUGGESTIONS} button").all_inner_texts()
    assert offered[0] == "Archive this project" and "Add a task here" in offered
    # Reachable by keyboard, named for a screen reader.
    archive = page.get_by_role("button", name="Ask: Archive this project")
    archive.focus()
    page.keyboard.press("Enter")

    # The step happens to Home (not Garden), and the page behind shows it archived without a reload.
    page.wait_for_selector("#project-name .badge-archived", timeout=30_000)
    home.refresh_from_db()
    assert home.archived and not Project.objects.get(name="Garden").archived
    thread = page.inner_text("#assistant-dock [data-assistant-thread]")
    assert "Archive this project" in thread
    page.screenshot(path=str(PROJECT_DIR / ".data" / "browser-page-context.png"))


def test_the_page_is_left_out_of_the_next_message_when_dismissed(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    log_in(page, site_url, "alice")
    page.goto(f"{site_url}/tracker/projects/{home.pk}/")
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock [data-assistant-about]:not([hidden])")
    page.click("#assistant-dock [data-assistant-about-dismiss]")
    assert page.is_hidden("#assistant-dock [data-assistant-about]")
    page.fill("#assistant-dock [data-assistant-input]", "archive this")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelectorAll('.assistant-message.is-assistant:not(.is-draft)').length >= 1")
    home.refresh_from_db()
    assert not home.archived  # without the page, "this" names nothing: the assistant asks which
    # After a run, the panel asks again what the page shows: the About line is back for the next message.
    page.wait_for_selector("#assistant-dock [data-assistant-about]:not([hidden])")
