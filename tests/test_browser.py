"""The conversation in a real browser: headless Chromium against daphne, the real worker and channel layer."""

from __future__ import annotations

from typing import Any

from tests.browser.harness import BROWSER_MARKS, ask, log_in
from tests.conftest import PROJECT_DIR, WorkerProcess
from tracker.models import Project, Task

# The fixtures `page` and `site_url` (one Chromium per module; daphne on the test database with the site's
# default model, the offline demo model) and the helpers come from tests/browser/harness.py.
pytestmark = BROWSER_MARKS


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
    assert "tracker_task_list — read" in page.inner_text("#assistant-dock .assistant-steps")

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
