"""Changing your mind, as the person does it, in Chromium, through daphne, the real worker and the channel layer: a
message is edited and sent again, and its first version, which recorded something, is kept as a branch whose effect
is said beside the switcher (‹ 1 / 2 ›); Retry answers again and keeps the earlier answer; the person pages between
answers and versions by keyboard, and a reload, the full page and the docked panel all read the branch they chose.
The panel with its switchers and an open editor passes the accessibility check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from assistant.models import AgentChat, AgentMessage
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
from tests.testapp.models import Effect

pytestmark = BROWSER_MARKS

CONV = "[data-assistant-conversation]"
THREAD = f"{CONV} [data-assistant-thread]"
DOCK = "#assistant-dock"
ANSWERS = f"{FINAL_REPLIES} .assistant-message-body"


def _said(page: Any, thread: str = THREAD) -> list[str]:
    return [text.strip() for text in page.locator(f"{thread} .assistant-message .assistant-message-body")
            .all_inner_texts()]


def test_edit_a_message_answer_again_and_page_between_the_branches(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess,
) -> None:
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    model_script({"tool_calls": [{"name": "test_flash", "arguments": {"label": "milk"}}]}, {"text": "Recorded milk."})
    ask(page, "record milk", within=CONV)

    # Edit the message: the editor opens on its text, says the branch is kept, and sends on Enter.
    model_script({"text": "Nothing recorded."})
    question = page.locator(f"{THREAD} .assistant-message.is-user").first
    question.get_by_role("button", name="Edit this message and send it again").click()
    editor = question.get_by_label("Edit your message")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("record milk")
    expect(question.locator(".assistant-edit-hint")).to_contain_text("what it did stays done")
    violations = axe_violations(page, CONV)
    assert not violations, describe_violations(violations)
    editor.fill("record nothing")
    editor.press("Enter")
    expect(page.locator(f"{THREAD} {ANSWERS}")).to_have_text(["Nothing recorded."])
    assert _said(page) == ["record nothing", "Nothing recorded."]
    switcher = page.locator(f"{THREAD} .assistant-message.is-user .assistant-branch")
    expect(switcher.locator(".assistant-branch-place")).to_have_text("2 / 2")
    # What the version left behind did is said, and it was not undone.
    expect(page.locator(f"{THREAD} .assistant-message.is-user .assistant-branch-did")).to_have_text(
        "Version 1 of 2 did: Recorded milk. Reading this one does not undo it.")
    assert list(Effect.objects.filter(owner=alice).values_list("label", flat=True)) == ["milk"]

    # Retry answers again; the earlier answer stays, one page back.
    model_script({"text": "Nothing, again."})
    page.locator(f"{THREAD} [data-retry]").click()
    expect(page.locator(f"{THREAD} {ANSWERS}")).to_have_text(["Nothing, again."])
    answer = page.locator(f"{THREAD} .assistant-message.is-assistant")
    expect(answer.locator(".assistant-branch-place")).to_have_text("2 / 2")
    assert AgentMessage.objects.filter(owner=alice, role="user").count() == 2  # no third message of the person's

    # Back to the first answer, by keyboard: the focus stays on the switcher, which now says 1 / 2.
    answer.get_by_role("button", name="Previous answer").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"{THREAD} {ANSWERS}")).to_have_text(["Nothing recorded."])
    expect(answer.locator(".assistant-branch-place")).to_have_text("1 / 2")
    expect(answer.get_by_role("button", name="Next answer")).to_be_focused()
    violations = axe_violations(page, CONV)
    assert not violations, describe_violations(violations)
    screenshot(page.locator(CONV), "branches-answers")

    # A reload reads the branch chosen.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    expect(page.locator(f"{THREAD} {ANSWERS}")).to_have_text(["Nothing recorded."])
    expect(page.locator(f"{THREAD} .assistant-message.is-assistant .assistant-branch-place")).to_have_text("1 / 2")

    # The first version, with its answer and the step that recorded milk.
    page.locator(f"{THREAD} .assistant-message.is-user").get_by_role("button", name="Previous version").click()
    expect(page.locator(f"{THREAD} {ANSWERS}")).to_have_text(["Recorded milk."])
    assert _said(page) == ["record milk", "Recorded milk."]
    expect(page.locator(f"{THREAD} .assistant-message.is-user .assistant-branch-place")).to_have_text("1 / 2")
    expect(page.locator(f"{THREAD} .assistant-message.is-user .assistant-branch-did")).to_have_count(0)
    expect(page.locator(f"{THREAD} .assistant-step")).not_to_have_count(0)
    assert AgentChat.objects.get(owner=alice).leaf.content == "Recorded milk."

    # The docked panel on another page reads the same branch, and goes on from it.
    page.goto(site_url + "/")
    page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} .assistant-status.is-connected")
    dock_thread = f"{DOCK} [data-assistant-thread]"
    expect(page.locator(f"{dock_thread} {ANSWERS}")).to_have_text(["Recorded milk."])
    model_script({"text": "It was milk."})
    ask(page, "what did you record?", within=DOCK)
    assert _said(page, dock_thread) == ["record milk", "Recorded milk.", "what did you record?", "It was milk."]
    violations = axe_violations(page, DOCK)
    assert not violations, describe_violations(violations)
