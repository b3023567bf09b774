"""CopilotKit itself in Chromium: `@copilotkit/react-core` and `@copilotkit/react-ui` 1.74 with no CopilotKit
runtime, their agent an `@ag-ui/client` HttpAgent pointed at the AG-UI endpoint (bundled in
tests/assets/copilotkit.min.js from the source in tests/assets/copilotkit/), on a page of the site's own origin,
signed in as a person, through daphne and the real worker.

What is held here: CopilotChat shows the reply of a read and of a write; an approval is CopilotKit's
`useInterrupt` card, and its Approve runs the action once (its Deny runs nothing), the reply follows, and the
person's next message is answered (CopilotKit resumes under the runId of the run that asked; read as a re-attach,
that answered nothing and left CopilotKit refusing every message after). The page makes no request but to the
site."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from assistant.models import AgentRun, AgentStep
from tests.browser.harness import BROWSER_MARKS, log_in, screenshot
from tests.conftest import PROJECT_DIR
from tracker.models import Project, Task

pytestmark = BROWSER_MARKS

ASSETS = PROJECT_DIR / "tests" / "assets"
PAGE_PATH = "/copilotkit-test/"
# A host's page with CopilotKit's chat in it (the bundle's `CopilotKitPage.mount`: the provider with the agent,
# CopilotChat, and the approval card of useInterrupt), talking to the endpoint with the session's CSRF token.
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>CopilotKit</title>
<link rel="stylesheet" href="/copilotkit-test/copilotkit.css">
<script src="/copilotkit-test/copilotkit.js"></script></head>
<body style="margin:0"><main id="app" style="height:100vh"></main>
<script>
  const csrf = (document.cookie.match(/(?:^|; )csrftoken=([^;]*)/) || [])[1] || "";
  window.agent = CopilotKitPage.mount(document.getElementById("app"), {
    url: "/assistant/ag-ui/", headers: {"X-CSRFToken": csrf}, threadId: "copilotkit-thread"});
</script></body></html>"""
ASSISTANT = ".copilotKitMessage.copilotKitAssistantMessage"
CARD = ".approval-card"


class CopilotPage:
    """The page, what it asked of anyone but the site, and the errors it logged."""

    def __init__(self, page: Any, site_url: str) -> None:
        self.page, self.site_url = page, site_url
        self.elsewhere: list[str] = []
        self.errors: list[str] = []

    def open(self) -> None:
        page = self.page
        # CopilotKit logs what goes wrong in a run (a refused resume, a stream it cannot read) as console errors.
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        # Routes run newest first: the page and its bundle are served here, the site by daphne, and anything
        # else is refused and noted (the test holds that there is nothing else).
        page.route("**/*", self._only_the_site)
        page.route(self.site_url + PAGE_PATH, lambda route: route.fulfill(body=PAGE, content_type="text/html"))
        page.route(self.site_url + PAGE_PATH + "copilotkit.js", lambda route: route.fulfill(
            path=str(ASSETS / "copilotkit.min.js"), content_type="text/javascript"))
        page.route(self.site_url + PAGE_PATH + "copilotkit.css", lambda route: route.fulfill(
            path=str(ASSETS / "copilotkit.min.css"), content_type="text/css"))
        page.goto(self.site_url + PAGE_PATH)
        expect(page.get_by_test_id("copilot-chat-textarea")).to_be_visible()

    def _only_the_site(self, route: Any) -> None:
        if route.request.url.startswith(self.site_url + "/"):
            route.fallback()
        else:
            self.elsewhere.append(route.request.url)
            route.abort()

    def send(self, text: str) -> None:
        """Type `text` into CopilotChat and send it, as a person does."""
        box = self.page.get_by_test_id("copilot-chat-textarea")
        box.fill(text)
        box.press("Enter")

    def replied(self, text: str) -> None:
        expect(self.page.locator(ASSISTANT).filter(has_text=text)).to_have_count(1, timeout=30_000)


@pytest.fixture
def copilot(page: Any, site_url: str, alice: Any) -> Iterator[CopilotPage]:
    log_in(page, site_url, "alice")
    opened = CopilotPage(page, site_url)
    opened.open()
    yield opened
    assert opened.elsewhere == [], "the page asked for something other than the site"
    assert opened.errors == []


def test_copilotkit_shows_the_reply_of_a_read_and_of_a_write(
    copilot: CopilotPage, model_script: Callable[..., None], alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    model_script({"text": "Let me look.", "tool_calls": [{"name": "tracker_project_list", "arguments": {}}]},
                 {"text": "You have one project: Garden."})

    copilot.send("Which projects do I have?")

    copilot.replied("You have one project: Garden.")
    run = AgentRun.objects.get()
    assert (run.status, run.channel) == ("succeeded", "panel")
    assert run.config["agui"]["thread_id"] == "copilotkit-thread" and run.session_digest

    model_script({"tool_calls": [{"name": "tracker_task_create",
                                  "arguments": {"project": garden.pk, "title": "Buy seeds"}}]},
                 {"text": "Added “Buy seeds” to Garden."})
    copilot.send("Add the task Buy seeds to Garden")

    copilot.replied("Added “Buy seeds” to Garden.")
    assert list(Task.objects.filter(project=garden).values_list("title", flat=True)) == ["Buy seeds"]
    assert AgentRun.objects.filter(status="succeeded").count() == 2
    screenshot(copilot.page, "copilotkit-read-write")


@pytest.mark.parametrize("answer", ["Approve", "Deny"])
def test_copilotkits_approval_card_answers_the_interrupt_and_the_chat_goes_on(
    copilot: CopilotPage, model_script: Callable[..., None], alice: Any, answer: str
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    reply = "Deleted the project Garden." if answer == "Approve" else "I left Garden alone."
    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": garden.pk}}]},
                 {"text": reply})
    page = copilot.page

    copilot.send("Delete Garden")

    card = page.locator(CARD)
    expect(card).to_be_visible(timeout=30_000)
    expect(card.locator(".approval-question")).to_contain_text("Delete the project “Garden”")
    assert Project.objects.filter(pk=garden.pk).exists()
    assert AgentRun.objects.get().status == "awaiting_confirmation"
    screenshot(page, "copilotkit-approval")

    card.get_by_role("button", name=answer).click()

    copilot.replied(reply)
    expect(card).to_have_count(0)
    step = AgentStep.objects.get(tool_name="tracker_project_delete")
    run = AgentRun.objects.get()
    assert run.status == "succeeded"
    if answer == "Approve":
        assert (step.confirmation, step.took_effect) == ("approved", True)
        assert not Project.objects.filter(pk=garden.pk).exists()
    else:
        assert (step.confirmation, step.took_effect) == ("denied", False)
        assert Project.objects.filter(pk=garden.pk).exists()
    screenshot(page, "copilotkit-approved" if answer == "Approve" else "copilotkit-denied")

    # The chat goes on: CopilotKit holds no interrupt left unanswered, so it sends the next message.
    model_script({"text": "Nothing else waits for you."})
    copilot.send("Anything else?")
    copilot.replied("Nothing else waits for you.")
    assert AgentRun.objects.count() == 2
