"""One person's whole journey through the panel, in Chromium, through daphne, the real worker and the
channel layer: ask → live steps → a Markdown answer → an approval card in words → approve → the project
list behind the panel updates without a reload → thumbs up → reload: all still there, same chat → switch to
an older chat and back → forget a memory. Then the same with the keyboard alone, and the panel's new
controls through the accessibility check. Screenshots for the closing note go to .data/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentRun
from tests.browser.harness import (
    BROWSER_MARKS,
    FINAL_REPLIES,
    ask,
    axe_violations,
    describe_violations,
    log_in,
    screenshot,
    wait_for_replies,
)
from tests.conftest import WorkerProcess, wait_for
from tracker.models import Comment, Project, Task

pytestmark = BROWSER_MARKS

WAIT = 20_000  # ms, as the page's own default timeout
DOCK = "#assistant-dock"
LIST_REPLY = "**You have 2 projects:**\n\n- Garden\n- Home, with 2 open tasks\n\nSay which one to change."
MEMORY = "Alice waters the garden on Sundays."


def _projects(alice: Any) -> tuple[Project, Project]:
    home = Project.objects.create(owner=alice, name="Home")
    for title in ("Fix the tap", "Paint the door"):
        task = Task.objects.create(project=home, title=title)
        Comment.objects.create(task=task, author=alice, body="Soon.")
    return home, Project.objects.create(owner=alice, name="Garden")


def _mark_document(page: Any) -> None:
    """A flag that only this document holds: a reload or a navigation loses it."""
    page.evaluate("window.__sameDocument = true")


def _same_document(page: Any) -> bool:
    return bool(page.evaluate("window.__sameDocument === true"))


def _thread_text(page: Any, within: str = DOCK) -> str:
    return page.inner_text(f"{within} [data-assistant-thread]")


def _watch_order(page: Any) -> None:
    """Record when the first step and the next final reply appear in the dock, as the person sees them."""
    page.evaluate(
        """([dock, replies]) => {
            const root = document.querySelector(dock);
            const before = root.querySelectorAll(replies).length;
            window.__seen = {step: null, reply: null};
            new MutationObserver(() => {
                const now = performance.now();
                if (window.__seen.step === null && root.querySelector(".assistant-step")) window.__seen.step = now;
                if (window.__seen.reply === null && root.querySelectorAll(replies).length > before) {
                    window.__seen.reply = now;
                }
            }).observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
        }""",
        [DOCK, FINAL_REPLIES],
    )


def _assert_no_template_source(page: Any, selector: str) -> None:
    """A template comment or tag that leaked into the page reads as garbage to the person."""
    text = page.inner_text(selector)
    leaked = [marker for marker in ("{#", "#}", "{%", "%}", "{{", "}}") if marker in text]
    assert not leaked, f"template source shows in {selector}: {leaked}\n{text[:400]}"


def _open_chat(page: Any, chat: AgentChat) -> None:
    """Through the dock's list of chats, as a person switches: no reload."""
    row = page.locator(f"{DOCK} [data-assistant-chats] [data-chat-id='{chat.pk}']")
    if not row.is_visible():
        page.click(f"{DOCK} [data-assistant-chats-toggle]")
    row.click(position={"x": 12, "y": 12})  # on its title, clear of the row's rename and delete buttons


def test_a_person_asks_approves_sees_the_page_keep_up_rates_reloads_switches_and_forgets(
    page: Any, site_url: str, alice: Any, bob: Any, model_script: Callable[..., None], celery_worker: WorkerProcess
) -> None:
    home, garden = _projects(alice)
    AgentMemory.objects.create(owner=alice, content=MEMORY, embedding=[1.0, 0.0, 0.0], embedder="t")
    AgentMemory.objects.create(owner=bob, content="Bob's secret memory.", embedding=[1.0, 0.0, 0.0], embedder="t")
    page.on("dialog", lambda dialog: dialog.accept())  # "Delete this memory?" and the like: the person agrees
    log_in(page, site_url, "alice")
    page.goto(site_url + "/tracker/")
    home_link = f"main a[href='/tracker/projects/{home.pk}/']"
    expect(page.locator(home_link)).to_have_count(1)
    _mark_document(page)
    page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")

    # An earlier chat, then a new one through the panel's own control.
    model_script({"text": "Hello! I can find and change your projects and tasks."})
    ask(page, "hello", within=DOCK)
    older = AgentChat.objects.get(owner=alice)
    page.click(f"{DOCK} [data-assistant-new-chat]")
    expect(page.locator(f"{DOCK} .assistant-message")).to_have_count(0, timeout=WAIT)

    # Ask: the steps show while the run works, then the answer is Markdown.
    model_script({"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]}, {"text": LIST_REPLY})
    _watch_order(page)
    ask(page, "which projects do I have?", within=DOCK)
    seen = page.evaluate("window.__seen")
    assert seen["step"] is not None and seen["step"] < seen["reply"], f"steps were not shown before the answer: {seen}"
    current = AgentChat.objects.exclude(pk=older.pk).get(owner=alice)
    answer = page.locator(f"{DOCK} {FINAL_REPLIES}").last
    expect(answer.locator(".assistant-message-body strong")).to_have_text("You have 2 projects:")
    expect(answer.locator(".assistant-message-body li")).to_have_count(2)
    assert "**" not in answer.locator(".assistant-message-body").inner_text()
    _assert_no_template_source(page, DOCK)
    screenshot(page, "dock")
    page.emulate_media(color_scheme="dark")
    screenshot(page, "dock-dark")
    page.emulate_media(color_scheme="light")

    # The approval card says what will happen, in words; approving changes the page behind, in place.
    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                 {"text": "Deleted **Home** and its tasks."})
    page.fill(f"{DOCK} [data-assistant-input]", "delete the project Home")
    page.press(f"{DOCK} [data-assistant-input]", "Enter")
    card = page.locator(f"{DOCK} .assistant-confirm")
    expect(card.locator("[data-confirm-summary]")).to_contain_text("Home", timeout=WAIT)
    screenshot(card, "approval-card")
    assert Project.objects.filter(pk=home.pk).exists()
    # A reload while the question waits: the card is still there, and the person can still type and send.
    page.reload()
    expect(card.locator("[data-confirm-summary]")).to_contain_text("Home", timeout=WAIT)
    expect(page.locator(f"{DOCK} [data-assistant-send]")).to_have_text("Send")
    expect(page.locator(f"{DOCK} [data-assistant-input]")).to_be_enabled()
    _mark_document(page)
    card.locator("[data-confirm='approve']").click()
    wait_for_replies(page, 2, within=DOCK)  # this chat's: the list, then the deletion
    assert not Project.objects.filter(pk=home.pk).exists()
    expect(page.locator(home_link)).to_have_count(0, timeout=WAIT)
    expect(page.locator(f"main a[href='/tracker/projects/{garden.pk}/']")).to_have_count(1)
    assert _same_document(page), "the project list was reloaded instead of refreshing its region"

    # Thumbs up on the answer: pressed, and stored as the run's quality score.
    deletion = AgentMessage.objects.filter(chat=current, role="assistant").latest("id")
    thumbs_up = page.locator(f"{DOCK} [data-message-id='{deletion.pk}'] [data-feedback='up']")
    thumbs_up.click()
    expect(thumbs_up).to_have_attribute("aria-pressed", "true", timeout=WAIT)
    wait_for(lambda: AgentRun.objects.get(pk=deletion.run_id).quality_score == 1.0, what="the thumbs up to be stored")

    # Reload: the same chat, its Markdown, its steps and the thumbs are all still there.
    page.reload()
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    wait_for_replies(page, 2, within=DOCK)
    thread = _thread_text(page)
    assert "delete the project Home" in thread and "Deleted Home and its tasks." in thread
    assert "Hello! I can find" not in thread
    expect(page.locator(f"{DOCK} .assistant-message-body strong").first).to_have_text("You have 2 projects:")
    expect(page.locator(f"{DOCK} .assistant-step").first).to_be_attached()
    expect(thumbs_up).to_have_attribute("aria-pressed", "true")
    expect(page.locator(home_link)).to_have_count(0)

    # Switch to the older chat and back, without a reload.
    _mark_document(page)
    _open_chat(page, older)
    expect(page.locator(f"{DOCK} [data-assistant-thread]")).to_contain_text("Hello! I can find", timeout=WAIT)
    assert "Deleted Home" not in _thread_text(page)
    _open_chat(page, current)
    expect(page.locator(f"{DOCK} [data-assistant-thread]")).to_contain_text("Deleted Home", timeout=WAIT)
    assert "Hello! I can find" not in _thread_text(page)
    assert _same_document(page), "switching chats reloaded the page"

    # A phone: the dock is the whole screen.
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "phone-dock")
    page.set_viewport_size({"width": 1280, "height": 900})

    # What it remembers: the panel links to the page, which lists only this person's memories.
    page.click(f"{DOCK} [data-assistant-memories]")
    page.wait_for_url(re.compile(r"/assistant/memories/"))
    expect(page.get_by_text(MEMORY, exact=True)).to_be_visible()
    assert "Bob's secret memory." not in page.inner_text("body")
    row = page.locator("li, tr, article, [data-memory-id]").filter(has_text=MEMORY).last
    row.get_by_role("button", name=re.compile(r"delete|forget|remove", re.IGNORECASE)).click()
    wait_for(lambda: not AgentMemory.objects.filter(owner=alice, content=MEMORY).exists(),
             what="the memory to be deleted")
    expect(page.get_by_text(MEMORY, exact=True)).to_have_count(0, timeout=WAIT)
    assert AgentMemory.objects.filter(owner=bob).count() == 1

    page.goto(site_url + "/assistant/")
    page.wait_for_selector("[data-assistant-status].is-connected")
    wait_for_replies(page, 2, within="[data-assistant-conversation]")
    _assert_no_template_source(page, "body")
    screenshot(page, "assistant-page")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "phone-assistant-page")


def _active_element_matches(page: Any, selector: str) -> bool:
    return bool(page.evaluate("(selector) => !!document.activeElement && document.activeElement.matches(selector)",
                              selector))


def test_send_approve_and_close_with_the_keyboard_alone(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess
) -> None:
    home, _garden = _projects(alice)
    page.goto(site_url + "/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw")
    page.press("#id_password", "Enter")
    page.wait_for_url(site_url + "/")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected", state="attached")

    page.keyboard.press("Alt+Shift+A")
    expect(page.locator(DOCK)).to_be_visible()
    assert _active_element_matches(page, f"{DOCK} [data-assistant-input]"), "the shortcut did not focus the input"

    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                 {"text": "Deleted Home."})
    page.keyboard.type("delete the project")
    page.keyboard.press("Shift+Enter")  # a new line, not a send
    page.keyboard.type("Home")
    assert page.input_value(f"{DOCK} [data-assistant-input]") == "delete the project\nHome"
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{DOCK} .assistant-confirm [data-confirm='approve']")
    assert AgentMessage.objects.get(owner=alice, role="user").content == "delete the project\nHome"

    for _ in range(25):
        if _active_element_matches(page, f"{DOCK} [data-confirm='approve']"):
            break
        page.keyboard.press("Tab")
    else:
        pytest.fail("Tab never reached the Approve button")
    page.keyboard.press("Enter")
    wait_for_replies(page, 1, within=DOCK)
    assert not Project.objects.filter(pk=home.pk).exists()

    page.keyboard.press("Escape")
    expect(page.locator(DOCK)).to_be_hidden()
    assert _active_element_matches(page, ".assistant-launcher"), "focus did not return to the launcher"
    page.keyboard.press("Alt+Shift+A")  # and back, from anywhere
    expect(page.locator(DOCK)).to_be_visible()
    assert _active_element_matches(page, f"{DOCK} [data-assistant-input]")


def test_the_panels_new_controls_have_no_serious_violations(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess
) -> None:
    """The chats list, an opened step, the feedback comment box and an approval card with its details."""
    home, _garden = _projects(alice)
    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    model_script({"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]}, {"text": LIST_REPLY})
    ask(page, "which projects do I have?", within=DOCK)
    page.locator(f"{DOCK} .assistant-step summary").first.click()
    page.locator(f"{DOCK} {FINAL_REPLIES} [data-feedback='down']").last.click()
    page.wait_for_selector(f"{DOCK} [data-feedback-comment]")
    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                 {"text": "Deleted."})
    page.fill(f"{DOCK} [data-assistant-input]", "delete the project Home")
    page.press(f"{DOCK} [data-assistant-input]", "Enter")
    # The card's details and its form of values (approve with changes), both open for the check.
    page.locator(f"{DOCK} .assistant-confirm [data-confirm='approve']").wait_for()
    for summary in page.locator(f"{DOCK} .assistant-confirm details > summary").all():
        summary.click()
    page.locator(f"{DOCK} .assistant-confirm [data-confirm-form]").wait_for()
    page.click(f"{DOCK} [data-assistant-chats-toggle]")
    page.wait_for_selector(f"{DOCK} [data-assistant-chats] [data-chat-id]")

    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found[scheme] = axe_violations(page, DOCK)
    assert not any(found.values()), "\n".join(
        f"[{scheme}]\n{describe_violations(violations)}" for scheme, violations in found.items() if violations
    )


def test_a_name_that_is_markup_shows_as_text_in_a_steps_result_and_in_the_card(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess
) -> None:
    """The XSS test proves nothing runs; this proves the name reached the step and the card, as text."""
    name = "<img src=x onerror=alert(1)>"
    evil = Project.objects.create(owner=alice, name=name)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")

    model_script({"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]}, {"text": "One project."})
    ask(page, "which projects do I have?", within=DOCK)
    read = page.locator(f"{DOCK} .assistant-step.is-read").first
    read.locator("summary").click()
    expect(read).to_contain_text(name)

    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": evil.pk}}]},
                 {"text": "Kept it."})
    page.fill(f"{DOCK} [data-assistant-input]", "delete it")
    page.press(f"{DOCK} [data-assistant-input]", "Enter")
    expect(page.locator(f"{DOCK} .assistant-confirm [data-confirm-summary]")).to_contain_text(name, timeout=WAIT)
    assert page.locator(f"{DOCK} [data-assistant-conversation] img").count() == 0
    assert dialogs == []
    page.click(f"{DOCK} .assistant-confirm [data-confirm='deny']")
    wait_for_replies(page, 2, within=DOCK)
    assert Project.objects.filter(pk=evil.pk).exists()
