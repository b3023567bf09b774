"""The conversation in a real browser: headless Chromium against daphne, the real worker and channel layer."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import PROJECT_DIR, WorkerProcess, daphne_on_test_database
from tracker.models import Project, Task

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # A developer's machine may lack Chromium; CI installs it, so there a missing browser is a failure.
    pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="Debian's chromium is not installed"),
]


@pytest.fixture(scope="module")
def site_url(session_worker: WorkerProcess, django_db_blocker: Any) -> Iterator[str]:
    """daphne serving the site (HTTP and websockets) on the test database."""
    with daphne_on_test_database(django_db_blocker) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def page(site_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "Chromium is needed for the browser tests: apt-get install chromium"
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still
    # plain synchronous code, which Django would otherwise refuse next to a running loop.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(20_000)
        yield page
        browser.close()


def log_in(page: Any, site_url: str, username: str) -> None:
    page.goto(site_url + "/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(site_url + "/")


def ask(page: Any, text: str) -> None:
    answered = page.locator(".assistant-message.is-assistant:not(.is-draft)").count()
    page.fill("[data-assistant-input]", text)
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"document.querySelectorAll('.assistant-message.is-assistant:not(.is-draft)').length > {answered}"
    )


def test_a_person_asks_the_docked_assistant_and_approves_a_deletion(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected")

    ask(page, "what are my open tasks?")
    assert "Fix the tap" in page.inner_text("#assistant-dock [data-assistant-thread]")
    # The step says what it did in words, not the tool's name.
    assert "Read 1 task" in page.inner_text("#assistant-dock .assistant-steps")

    page.fill("[data-assistant-input]", "delete the project Home")
    page.keyboard.press("Enter")
    page.wait_for_selector(".assistant-confirm")
    page.reload()  # the question survives a reload: it is a row, not a promise
    page.wait_for_selector(".assistant-confirm")
    assert Project.objects.filter(pk=home.pk).exists()
    page.click(".assistant-confirm .assistant-button-primary")
    page.wait_for_function("document.querySelector('[data-assistant-send]').textContent === 'Send'")
    page.wait_for_function("document.querySelectorAll('.assistant-message.is-assistant:not(.is-draft)').length >= 2")
    assert not Project.objects.filter(pk=home.pk).exists()
    page.screenshot(path=str(PROJECT_DIR / ".data" / "browser-conversation.png"))


def open_dock(page: Any) -> None:
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected")


def test_after_a_reload_with_a_pending_approval_the_input_works_and_the_button_says_send(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    Project.objects.create(owner=alice, name="Home")
    log_in(page, site_url, "alice")
    open_dock(page)
    page.fill("[data-assistant-input]", "delete the project Home")
    page.keyboard.press("Enter")
    page.wait_for_selector(".assistant-confirm")
    page.reload()
    page.wait_for_selector(".assistant-confirm")
    assert page.inner_text("[data-assistant-send]") == "Send"
    # A new message instead of an answer: it is sent (and supersedes the question), not swallowed.
    page.fill("[data-assistant-input]", "what are my open tasks?")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "[...document.querySelectorAll('.assistant-message.is-user')].some("
        "(node) => node.textContent.includes('what are my open tasks?'))"
    )
    assert page.input_value("[data-assistant-input]") == ""
