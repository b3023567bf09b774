"""Script in a reply, a tool's result or a project's name stays text in the panel: no dialog, no element
that runs or loads anything, no request to the address a Markdown image names. Live in the dock, and again
when /assistant/ draws the same chat from the server's rows (with the approval card pending, then after)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.browser.harness import BROWSER_MARKS, ask, log_in, wait_for_replies
from tests.conftest import WorkerProcess
from tracker.models import Project

pytestmark = BROWSER_MARKS

#: Nothing may request this address: a Markdown image pointing at it would if drawn as <img>.
TRAP = "127.0.0.1:9"
PAYLOADS = (
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[x](javascript:alert(1))",
    "<svg onload=alert(1)>",
    "<iframe src=javascript:alert(1)>",
    f"![a](http://{TRAP}/x.png)",
)
#: A reply made of the payloads, on lines of their own, inline, and inside Markdown that is rendered.
REPLY = "\n\n".join(
    [
        "Payloads follow.",
        *PAYLOADS,
        "Inline: " + " and ".join(PAYLOADS),
        "- a list item " + PAYLOADS[0] + "\n- **bold " + PAYLOADS[3] + "**\n- [click](JaVaScRiPt:alert(1))",
        "| a | b |\n|---|---|\n| " + PAYLOADS[0] + " | " + PAYLOADS[4] + " |",
        "```html\n" + PAYLOADS[1] + "\n```",
        '<a href="javascript:alert(1)">raw link</a> <div onmouseover="alert(1)">hover</div>',
    ]
)

# What nothing from a reply, a step or a card may become inside the conversation. Icons the panel draws
# itself sit inside its buttons; a payload never does, so an <svg> is forbidden everywhere else.
DANGEROUS_ELEMENTS = """(root) => {
    const found = [];
    const note = (node, why) => found.push(why + ": " + node.outerHTML.slice(0, 160));
    root.querySelectorAll("script, iframe, frame, object, embed, img, image, video, audio, source, link, style, "
                          + "base, meta").forEach((node) => note(node, "element"));
    root.querySelectorAll("svg").forEach((node) => { if (!node.closest("button")) note(node, "svg"); });
    root.querySelectorAll("*").forEach((node) => {
        for (const attribute of node.attributes) {
            if (attribute.name.toLowerCase().startsWith("on")) note(node, "handler " + attribute.name);
        }
        const url = (node.getAttribute("href") || node.getAttribute("src") || node.getAttribute("action") || "");
        if (/^\\s*(javascript|data|vbscript):/i.test(url)) note(node, "script url");
    });
    return found;
}"""


def _assert_harmless(page: Any, conversation: str, dialogs: list[str], trapped: list[str]) -> None:
    # Open every step and "Details" toggle first: what a panel draws only when opened is drawn now.
    page.locator(f"{conversation} details").evaluate_all("(toggles) => toggles.forEach((t) => { t.open = true; })")
    found = page.locator(conversation).evaluate(DANGEROUS_ELEMENTS)
    assert found == [], "\n".join(found)
    assert dialogs == [], f"a script ran: {dialogs}"
    assert trapped == [], f"the page fetched {trapped}"


def _watch(page: Any, site_url: str) -> tuple[list[str], list[str]]:
    dialogs: list[str] = []
    trapped: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    # `<img src=x>` would fetch the site's own /x: any request for it, or to the trap, is a failure.
    page.on("request", lambda request: trapped.append(request.url)
            if TRAP in request.url or request.url.rstrip("/").endswith(("/x", "/x.png")) else None)
    return dialogs, trapped


def test_payloads_in_replies_results_names_and_cards_stay_text(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess
) -> None:
    evil = Project.objects.create(owner=alice, name=PAYLOADS[0], description="<script>alert(1)</script>")
    dialogs, trapped = _watch(page, site_url)
    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock [data-assistant-status].is-connected")
    dock = "#assistant-dock [data-assistant-conversation]"

    model_script({"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]}, {"text": REPLY})
    ask(page, "what projects do I have?", within="#assistant-dock")
    assert "Payloads follow." in page.inner_text(f"{dock} [data-assistant-thread]")
    _assert_harmless(page, dock, dialogs, trapped)

    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": evil.pk}}]},
                 {"text": "Left " + PAYLOADS[3] + " alone."})
    page.fill("#assistant-dock [data-assistant-input]", "delete it")
    page.press("#assistant-dock [data-assistant-input]", "Enter")
    page.wait_for_selector(f"{dock} .assistant-confirm")
    _assert_harmless(page, dock, dialogs, trapped)

    # The same chat drawn from the server's rows: the history, the past steps and the pending card.
    page.goto(site_url + "/assistant/")
    conversation = "[data-assistant-conversation]"  # the page's own: it draws no dock
    page.wait_for_selector("[data-assistant-conversation] .assistant-confirm")
    _assert_harmless(page, conversation, dialogs, trapped)
    page.click("[data-assistant-conversation] .assistant-confirm button:has-text('Deny')")
    wait_for_replies(page, 2, within="[data-assistant-conversation]")
    assert Project.objects.filter(pk=evil.pk).exists()
    _assert_harmless(page, conversation, dialogs, trapped)
    page.reload()
    wait_for_replies(page, 2, within="[data-assistant-conversation]")
    _assert_harmless(page, conversation, dialogs, trapped)
