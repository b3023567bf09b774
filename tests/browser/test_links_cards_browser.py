"""Answers that link and steps that show, as the person sees them, in Chromium, through daphne, the real worker
and the channel layer: the tracker's card of the task a step added shows under the run's steps (still in sight
after a reload, with the steps folded away), the reply's link to the person's own task opens its page, and a link
the model wrote to a task that is not theirs is only words. The conversation with both passes the accessibility
check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from tests.browser.harness import (
    BROWSER_MARKS,
    FINAL_REPLIES,
    ask,
    axe_violations,
    describe_violations,
    log_in,
    screenshot,
)
from tests.conftest import WorkerProcess
from tracker.models import Project, Task

pytestmark = BROWSER_MARKS

CONV = "[data-assistant-conversation]"
THREAD = f"{CONV} [data-assistant-thread]"


def test_a_card_shows_under_the_steps_and_the_answers_link_opens_the_task(
    page: Any, site_url: str, alice: Any, bob: Any, model_script: Callable[..., None], celery_worker: WorkerProcess,
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    tap = Task.objects.create(project=home, title="Fix the tap")
    bobs = Task.objects.create(project=Project.objects.create(owner=bob, name="Website"), title="Launch")
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    model_script(
        {"tool_calls": [{"name": "tracker_task_create",
                         "arguments": {"project": home.pk, "title": "Buy milk", "priority": 3}}]},
        {"text": f"Added it. [Fix the tap](/tracker/tasks/{tap.pk}/) is still open; "
                 f"[Launch](/tracker/tasks/{bobs.pk}/) is not yours."},
    )

    ask(page, "add 'Buy milk' to Home, high priority", within=CONV)

    milk = Task.objects.get(title="Buy milk")
    card = page.locator(f"{THREAD} .assistant-object-card")
    expect(card).to_have_count(1)
    expect(card.get_by_role("link", name="Buy milk")).to_have_attribute("href", f"/tracker/tasks/{milk.pk}/")
    expect(card).to_contain_text("High")
    expect(card).to_contain_text("Home")
    reply = page.locator(f"{THREAD} {FINAL_REPLIES} .assistant-message-body")
    expect(reply.get_by_role("link")).to_have_count(1)
    expect(reply.get_by_role("link", name="Fix the tap")).to_have_attribute("href", f"/tracker/tasks/{tap.pk}/")
    expect(reply).to_contain_text("Launch is not yours.")
    violations = axe_violations(page, CONV)
    assert not violations, describe_violations(violations)
    screenshot(page.locator(CONV), "links-and-cards")

    # After a reload the run's steps are folded away; its card is still in sight.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    expect(card.get_by_role("link", name="Buy milk")).to_be_visible()
    # The reply's link opens the task's own page.
    reply.get_by_role("link", name="Fix the tap").click()
    page.wait_for_url(site_url + f"/tracker/tasks/{tap.pk}/")
    expect(page.get_by_role("heading", name="Fix the tap")).to_be_visible()
