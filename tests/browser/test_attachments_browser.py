"""Attaching files, as the person does it, in Chromium, through daphne, the real worker and the channel layer: picked
with the paperclip, a CSV waits above the message box, goes with the message and shows under it, opening for its
person; a file of a type not taken says why on its chip and is not sent. The panel with its chips passes the
accessibility check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from assistant.models import AgentAttachment
from tests.browser.harness import BROWSER_MARKS, axe_violations, describe_violations, log_in, screenshot
from tests.conftest import WorkerProcess

pytestmark = BROWSER_MARKS

CONV = "[data-assistant-conversation]"
THREAD = f"{CONV} [data-assistant-thread]"
CSV = b"title,priority\nBuy milk,2\nFix the fence,3\n"


def test_pick_a_file_send_it_with_a_message_and_open_it(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess,
) -> None:
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    model_script({"text": "It lists two tasks."})

    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach files").first.click()
    chooser.value.set_files([
        {"name": "tasks.csv", "mimeType": "text/csv", "buffer": CSV},
        {"name": "program.exe", "mimeType": "application/octet-stream", "buffer": b"MZ\x90\x00\x03\x00"},
    ])
    tray = page.locator(f"{CONV} [data-assistant-attachments]")
    expect(tray.locator(".assistant-attachment-chip")).to_have_count(2)
    expect(tray.locator(".assistant-attachment-chip.is-failed")).to_contain_text("cannot be attached")
    expect(tray.locator(".assistant-attachment-chip.is-uploading")).to_have_count(0)
    violations = axe_violations(page, CONV)
    assert not violations, describe_violations(violations)
    screenshot(page.locator(CONV), "attachments-tray")
    # The refused one is taken off; the other goes with the message.
    tray.get_by_role("button", name="Remove program.exe").click()
    page.fill(f"{CONV} [data-assistant-input]", "what is in this?")
    page.press(f"{CONV} [data-assistant-input]", "Enter")

    question = page.locator(f"{THREAD} .assistant-message.is-user")
    link = question.get_by_role("link", name=f"tasks.csv ({len(CSV)} bytes)")
    expect(link).to_be_visible()
    expect(tray).to_be_hidden()
    answers = page.locator(f"{THREAD} .assistant-message.is-assistant:not(.is-draft) .assistant-message-body")
    expect(answers).to_have_text(["It lists two tasks."])
    [attachment] = AgentAttachment.objects.filter(owner=alice)
    assert attachment.message.content == "what is in this?" and attachment.name == "tasks.csv"
    # It opens for its person.
    answer = page.request.get(site_url + link.get_attribute("href"))
    assert answer.ok and answer.body() == CSV
    # And after a reload it is still there under the message.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    expect(question.get_by_role("link", name=f"tasks.csv ({len(CSV)} bytes)")).to_be_visible()

    # Edited, the message takes its file again: the editor holds it, and it goes with the new version.
    model_script({"text": "Still two tasks."})
    question.get_by_role("button", name="Edit this message and send it again").click()
    kept = question.get_by_role("group", name="Files that go with the edit")
    expect(kept.locator(".assistant-attachment-chip")).to_have_text([f"tasks.csv{len(CSV)} bytes×"])
    violations = axe_violations(page, CONV)
    assert not violations, describe_violations(violations)
    screenshot(question, "attachments-edit")
    editor = question.get_by_label("Edit your message")
    editor.fill("how many tasks?")
    editor.press("Enter")
    expect(answers).to_have_text(["Still two tasks."])
    edited = page.locator(f"{THREAD} .assistant-message.is-user")
    expect(edited.locator(".assistant-message-body")).to_have_text("how many tasks?")
    expect(edited.get_by_role("link", name=f"tasks.csv ({len(CSV)} bytes)")).to_be_visible()
    assert AgentAttachment.objects.get(message__content="how many tasks?").name == "tasks.csv"

    # Edited again with the file taken off: the new version goes without it.
    model_script({"text": "No file this time."})
    edited.get_by_role("button", name="Edit this message and send it again").click()
    edited.get_by_role("button", name="Remove tasks.csv").click()
    expect(edited.get_by_role("group", name="Files that go with the edit")).to_have_count(1)
    expect(edited.locator("[data-edit-file]")).to_have_count(0)
    expect(edited.get_by_label("Edit your message")).to_be_focused()
    edited.get_by_label("Edit your message").fill("any tasks?")
    edited.get_by_label("Edit your message").press("Enter")
    expect(answers).to_have_text(["No file this time."])
    expect(page.locator(f"{THREAD} .assistant-message.is-user .assistant-message-body")).to_have_text("any tasks?")
    expect(page.locator(f"{THREAD} .assistant-message.is-user .assistant-message-attachments")).to_have_count(0)
    assert not AgentAttachment.objects.filter(message__content="any tasks?").exists()
