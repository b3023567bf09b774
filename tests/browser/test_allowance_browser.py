"""How much is left of an allowance, as the person sees it, in Chromium, through daphne, the real worker and the
channel layer: once less than a quarter of their daily allowance is left, a reply is followed by a line above the
message box that says how much, and when it resets, and a reload keeps it. The panel with it passes the accessibility
check."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.utils import timezone
from playwright.sync_api import expect

from assistant.models import AgentAllowance, AgentChat, AgentRun
from tests.browser.harness import BROWSER_MARKS, ask, axe_violations, describe_violations, log_in, screenshot
from tests.conftest import WorkerProcess

pytestmark = BROWSER_MARKS

CONV = "[data-assistant-conversation]"


def test_a_reply_says_how_much_is_left_of_an_allowance_nearly_used(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess,
) -> None:
    AgentAllowance.objects.create(user=alice, tokens_per_day=60_000)
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    note = page.locator(f"{CONV} [data-assistant-allowance]")

    # Plenty left: a reply says nothing of it.
    model_script({"text": "Hello."})
    ask(page, "hello", within=CONV)
    expect(note).to_be_hidden()

    # 47,000 used earlier today: under a quarter of the 60,000 is left.
    chat = AgentChat.objects.create(owner=alice, title="Earlier")
    AgentRun.objects.create(owner=alice, chat=chat, spec="default", status="succeeded", total_tokens=47_000,
                            profile_recorded_at=timezone.now())
    model_script({"text": "Hello again."})
    ask(page, "hello again", within=CONV)
    expect(note).to_be_visible()
    expect(note).to_have_text(re.compile(r"^[\d,]+ tokens are left of your daily allowance of 60,000 tokens\. "
                                         r"It resets at midnight \(in (\d+ h|under an hour)\)\.$"))
    expect(note).to_have_attribute("role", "status")
    said = note.text_content()
    # A reload keeps it: the chat's load says it again.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    expect(note).to_be_visible()
    expect(note).to_have_text(re.compile("^" + re.escape(said.split(" It resets")[0]) + " It resets at midnight"))
    violations = axe_violations(page, CONV)
    assert not violations, describe_violations(violations)
    screenshot(page.locator(CONV), "allowance-note")
