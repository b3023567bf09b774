"""The conversation in a real browser: headless Chromium against daphne, the real worker and channel layer."""

from __future__ import annotations

import re
from typing import Any

import pytest

from assistant.infra.redis_connection import redis_client
from assistant.live.events import event_seq_key, publisher, user_group
from assistant.testing.sockets import SETTLED
from tests.browser.harness import BROWSER_MARKS, ask, log_in
from tests.conftest import PROJECT_DIR, WorkerProcess
from tracker.models import Project, Task

# The fixtures `page` and `site_url` (one Chromium per module; daphne on the test database with the site's
# default model, the offline demo model) and the helpers come from tests/browser/harness.py.
pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def site_model() -> None:
    """The site's own model answers, the offline demo model, wherever this module sits (tests/browser/'s
    conftest gives its modules a scripted one)."""
    return None


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


# The page's sockets open, but the page hears of it only when the test releases them: a slow handshake.
HOLD_SOCKETS_OPEN = """(() => {
  const Real = window.WebSocket;
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  window.releaseSockets = () => release();
  window.WebSocket = function (url, protocols) {
    const socket = new Real(url, protocols);
    const listen = socket.addEventListener.bind(socket);
    socket.addEventListener = (type, listener, options) => listen(
      type, type === "open" ? (event) => released.then(() => listener(event)) : listener, options);
    return socket;
  };
  window.WebSocket.prototype = Real.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();"""


def test_a_dock_opened_before_its_socket_connects_gives_the_input_focus_once_it_can_type(
    page: Any, site_url: str, alice: Any
) -> None:
    page.add_init_script(HOLD_SOCKETS_OPEN)
    log_in(page, site_url, "alice")
    page.focus("a[href='/tracker/']")
    page.keyboard.press("Alt+Shift+A")
    page.wait_for_selector("#assistant-dock:not([hidden])")
    assert page.is_disabled("#assistant-dock [data-assistant-input]")
    assert page.evaluate("document.activeElement.matches('#assistant-dock [data-assistant-toggle]')")
    page.evaluate("window.releaseSockets()")
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected")
    page.wait_for_function("document.activeElement.matches('#assistant-dock [data-assistant-input]')")


def test_the_keyboard_alone_opens_sends_approves_and_closes(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    log_in(page, site_url, "alice")
    page.focus("a[href='/tracker/']")
    page.keyboard.press("Alt+Shift+A")  # the documented shortcut, from anywhere on the page
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected")
    assert page.evaluate("document.activeElement.matches('[data-assistant-input]')")

    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert page.input_value("[data-assistant-input]") == "first line\nsecond line"
    page.fill("[data-assistant-input]", "")

    page.keyboard.type("delete the project Home")
    page.keyboard.press("Enter")
    page.wait_for_selector(".assistant-confirm")
    # The card says what will happen, names its step, and takes focus on its Approve button.
    card = page.locator(".assistant-confirm")
    # In the server's words when it gives them ("Delete the project “Home”…"), else the tool's description.
    assert re.match(r"Delete (a|the) project", card.locator("[data-confirm-summary]").inner_text())
    assert "step" in (card.get_attribute("aria-label") or "")
    assert card.get_attribute("role") == "group"
    page.wait_for_function("document.activeElement && document.activeElement.matches('[data-confirm=\"approve\"]')")
    page.screenshot(path=str(PROJECT_DIR / ".data" / "browser-approval-card.png"))

    # Esc closes the dock, approves nothing, and gives focus back to what opened the dock.
    page.keyboard.press("Escape")
    page.wait_for_selector("#assistant-dock", state="hidden")
    assert page.evaluate("document.activeElement.getAttribute('href')") == "/tracker/"
    assert Project.objects.filter(pk=home.pk).exists()

    page.keyboard.press("Alt+Shift+A")
    page.wait_for_selector("#assistant-dock .assistant-confirm")
    page.focus("[data-confirm='approve']")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelectorAll('.assistant-message.is-assistant:not(.is-draft)').length >= 1")
    page.wait_for_function("document.querySelector('[data-assistant-send]').textContent === 'Send'")
    assert not Project.objects.filter(pk=home.pk).exists()
    assert page.locator(".assistant-confirm").count() == 0


def test_a_step_opens_to_its_arguments_result_and_duration(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    log_in(page, site_url, "alice")
    open_dock(page)
    ask(page, "what are my open tasks?")
    step = page.locator(".assistant-step.is-read").first
    assert step.evaluate("node => node.tagName") == "DETAILS"
    assert step.locator("summary").inner_text().strip().endswith("Read 1 task")
    assert not step.locator(".assistant-step-body").is_visible()
    step.locator("summary").click()
    body = step.locator(".assistant-step-body").inner_text()
    assert "Arguments" in body and "Result" in body and "Fix the tap" in body and "Took" in body
    assert "tracker_task_list" in body  # the tool's own name is there for whoever wants it


def test_a_failed_step_stands_out_in_colour_icon_and_words(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    log_in(page, site_url, "alice")
    open_dock(page)
    ask(page, "create a task 'x' in Nowhere")  # no such project: the tracker's view refuses the form
    failed = page.locator(".assistant-step.is-failed")
    assert failed.count() == 1
    line = failed.locator("summary").inner_text()
    assert "✕" in line and "Failed: Create a task" in line  # an icon and words, not colour alone
    assert failed.locator(".assistant-step-icon").get_attribute("aria-hidden") == "true"
    colours = page.evaluate("""() => ({
        failed: getComputedStyle(document.querySelector('.assistant-step.is-failed')).color,
        other: getComputedStyle(document.querySelector('.assistant-step.is-model')).color})""")
    assert colours["failed"] == "rgb(179, 38, 30)" and colours["other"] != colours["failed"]
    failed.locator("summary").click()
    assert "Why it did not take effect" in failed.locator(".assistant-step-body").inner_text()


def test_a_step_that_changed_data_tells_the_page_once_and_a_reload_does_not_repeat_it(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    Project.objects.create(owner=alice, name="Home")
    log_in(page, site_url, "alice")
    open_dock(page)
    listen = """() => { window.changes = [];
        document.body.addEventListener("assistant:changed", (event) => window.changes.push(event.detail)); }"""
    page.evaluate(listen)
    ask(page, "create a task 'Buy milk' in Home")
    assert Task.objects.filter(title="Buy milk").exists()
    changes = page.evaluate("window.changes")
    assert len(changes) == 1
    assert changes[0]["tools"] == ["tracker_task_create"]
    assert isinstance(changes[0]["models"], list) and changes[0]["chat_id"] and changes[0]["run_id"]
    # The step line says what was done, in the site's own words.
    assert "Buy milk" in page.inner_text(".assistant-step.is-done summary")
    # Replies and steps are announced through a polite live region, not by re-reading the thread.
    assert page.locator("[data-assistant-announce][aria-live='polite']").count() == 1
    assert page.locator("[data-assistant-thread][aria-live]").count() == 0
    page.wait_for_function("document.querySelector('#assistant-dock [data-assistant-announce]').textContent.length > 0")

    page.reload()
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected")
    page.evaluate(listen)
    page.wait_for_selector(".assistant-message.is-assistant")
    # Every event sent the person since the reload has been handled once the page has counted a marker sent
    # now: the events of a person are numbered in the order they go out.
    publisher.publish(user_group(alice.pk), {"type": SETTLED, "mark": "after the reload"})
    assert publisher.flush(timeout=5)
    marker = int(redis_client().get(event_seq_key(alice.pk)))
    page.wait_for_function(
        "(n) => document.querySelector('#assistant-dock [data-assistant-conversation]')"
        ".assistantConversation.sequence.last >= n", arg=marker)
    assert page.evaluate("window.changes") == []


def test_the_dock_remembers_its_width_and_that_it_was_open(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    log_in(page, site_url, "alice")
    open_dock(page)
    before = page.evaluate("document.getElementById('assistant-dock').getBoundingClientRect().width")
    page.focus("[data-assistant-resize]")
    for _ in range(5):
        page.keyboard.press("ArrowLeft")  # the handle is on the left edge: left widens
    wider = page.evaluate("document.getElementById('assistant-dock').getBoundingClientRect().width")
    assert wider == before + 80
    assert page.get_attribute("[data-assistant-resize]", "aria-valuenow") == str(int(wider))
    page.reload()
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected")
    assert page.is_visible("#assistant-dock")
    assert page.evaluate("document.getElementById('assistant-dock').getBoundingClientRect().width") == wider
    # The page moved aside by the dock's width, not under it.
    assert page.evaluate("parseFloat(getComputedStyle(document.body).marginRight)") == wider
    page.click("#assistant-dock .assistant-dock-close")
    page.reload()
    page.wait_for_selector(".assistant-launcher")
    assert not page.is_visible("#assistant-dock")


CONTRAST = """(selectors) => {
    const channel = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
    const rgb = (text) => text.match(/[\\d.]+/g).map(Number);
    const luminance = (text) => {
        const [r, g, b] = rgb(text);
        return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    };
    const background = (node) => {
        for (; node; node = node.parentElement) {
            const colour = getComputedStyle(node).backgroundColor;
            const parts = rgb(colour);
            if (parts.length < 4 || parts[3] > 0) return colour;
        }
        return "rgb(255, 255, 255)";
    };
    return selectors.map((selector) => {
        const node = document.querySelector(selector);
        const fg = luminance(getComputedStyle(node).color), bg = luminance(background(node));
        return {selector, bg: background(node), ratio: (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05)};
    });
}"""


def test_dark_mode_follows_the_system_and_keeps_text_readable(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    Project.objects.create(owner=alice, name="Home")
    selectors = ["#assistant-dock .assistant-dock-header strong", "#assistant-dock .assistant-status",
                 "#assistant-dock .assistant-message.is-user .assistant-message-body",
                 "#assistant-dock .assistant-message.is-assistant .assistant-message-body",
                 "#assistant-dock .assistant-run-steps-summary", "#assistant-dock [data-assistant-send]",
                 "#assistant-dock [data-assistant-new-chat]", "#assistant-dock .assistant-dock-expand",
                 "#assistant-dock [data-copy]"]
    log_in(page, site_url, "alice")
    open_dock(page)
    ask(page, "what are my open tasks?")
    for scheme in ["light", "dark"]:
        page.emulate_media(color_scheme=scheme)
        results = page.evaluate(CONTRAST, selectors)
        for result in results:
            assert result["ratio"] >= 4.5, (scheme, result)
        surface = page.evaluate("getComputedStyle(document.getElementById('assistant-dock')).backgroundColor")
        assert surface == ("rgb(255, 255, 255)" if scheme == "light" else "rgb(23, 26, 33)")
    page.screenshot(path=str(PROJECT_DIR / ".data" / "browser-dock-dark.png"))


def test_offline_says_what_it_is_doing_and_recovers_on_its_own(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    status = "#assistant-dock [data-assistant-status]"
    log_in(page, site_url, "alice")
    open_dock(page)
    page.context.set_offline(True)  # the network goes: the socket drops and reconnecting fails
    page.wait_for_function(
        f"/^Offline — reconnecting in \\d+ s…$/.test(document.querySelector('{status}').textContent)"
    )
    assert page.is_visible("#assistant-dock [data-assistant-reconnect]")
    assert page.is_disabled("#assistant-dock [data-assistant-input]")
    page.context.set_offline(False)
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected", timeout=30_000)  # on its own
    assert not page.is_visible("#assistant-dock [data-assistant-reconnect]")
    assert page.is_enabled("#assistant-dock [data-assistant-input]")


def test_a_new_chat_then_retry_and_copy_the_answer(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    from assistant.models import AgentChat

    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    log_in(page, site_url, "alice")
    open_dock(page)
    ask(page, "what are my open tasks?")
    page.click("[data-assistant-new-chat]")
    assert page.locator(".assistant-message").count() == 0
    assert page.evaluate("document.activeElement.matches('[data-assistant-input]')")
    ask(page, "what are my open tasks?")
    assert AgentChat.objects.filter(owner=alice).count() == 2

    assert page.locator("[data-retry]").count() == 1
    page.click("[data-retry]")
    # Answered again: the new answer is the second of two, the question is not sent again.
    page.wait_for_function("[...document.querySelectorAll('.assistant-message.is-assistant .assistant-branch-place')]"
                           ".some((node) => node.textContent === '2 / 2')")
    assert page.locator(".assistant-message.is-user").count() == 1
    assert page.locator("[data-retry]").count() == 1  # only on the last answer

    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click(".assistant-message.is-assistant >> nth=-1 >> [data-copy]")
    page.wait_for_function("[...document.querySelectorAll('[data-copy]')].some((n) => n.textContent === 'Copied')")
    assert "Fix the tap" in page.evaluate("navigator.clipboard.readText()")


def test_the_page_and_a_phone_width(page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(".assistant-status.is-connected")
    ask(page, "what are my open tasks?")
    page.screenshot(path=str(PROJECT_DIR / ".data" / "browser-page.png"))

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(site_url + "/")
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock .assistant-status.is-connected")
    box = page.evaluate("JSON.stringify(document.getElementById('assistant-dock').getBoundingClientRect())")
    import json

    rect = json.loads(box)
    assert rect["width"] == 390 and rect["height"] == 844  # a full-screen sheet
    assert not page.is_visible("[data-assistant-resize]")
    page.screenshot(path=str(PROJECT_DIR / ".data" / "browser-phone.png"))


def test_a_dock_opened_after_its_chat_loaded_shows_the_newest_message(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    from assistant.models import AgentChat, AgentMessage

    chat = AgentChat.objects.create(owner=alice, title="A long chat")
    for number in range(40):
        AgentMessage.objects.create(chat=chat, owner=alice, role="user" if number % 2 == 0 else "assistant",
                                    content=f"message {number}")
    log_in(page, site_url, "alice")
    page.wait_for_selector("#assistant-dock .assistant-message >> text=message 39", state="attached")  # drawn, hidden
    page.click(".assistant-launcher")
    newest = page.locator("#assistant-dock .assistant-message", has_text="message 39")
    newest.wait_for()
    page.wait_for_function("""() => {
        const thread = document.querySelector('#assistant-dock [data-assistant-thread]').getBoundingClientRect();
        const items = document.querySelectorAll('#assistant-dock .assistant-message');
        const last = items[items.length - 1].getBoundingClientRect();
        return last.bottom <= thread.bottom + 1 && last.top >= thread.top;
    }""", timeout=5_000)
