"""htmx really swaps the tracker's regions in a browser: when `assistant:changed` is raised on <body> (as the
panel does after a step that took effect), the project list shows a project created meanwhile, without a
reload, and keeps the reader's focus and scroll position."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import daphne_on_test_database
from tracker.models import Project

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="Debian's chromium is not installed"),
]

CHANGED = (
    "document.body.dispatchEvent(new CustomEvent('assistant:changed', "
    "{bubbles: true, detail: {run_id: 1, chat_id: 1, tools: ['tracker_project_create'], models: ['tracker.project']}}))"
)


@pytest.fixture
def browser_page(django_db_blocker: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "Chromium is needed for the browser tests: apt-get install chromium"
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # the test's ORM calls beside Playwright's loop
    with daphne_on_test_database(django_db_blocker) as port, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1000, "height": 500})
        page.set_default_timeout(20_000)
        yield page, f"http://127.0.0.1:{port}"
        browser.close()


def test_the_project_list_shows_a_new_project_after_assistant_changed_without_a_reload(
    browser_page: tuple[Any, str], alice: Any
) -> None:
    page, site_url = browser_page
    for number in range(12):
        Project.objects.create(owner=alice, name=f"Project {number:02d}")
    page.goto(site_url + "/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(site_url + "/")
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
