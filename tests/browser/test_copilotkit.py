"""CopilotKit itself in Chromium: `@copilotkit/react-core` and `@copilotkit/react-ui` 1.74 with no CopilotKit
runtime, their agent an `@ag-ui/client` HttpAgent pointed at the AG-UI endpoint (bundled in
tests/assets/copilotkit.min.js from the source in tests/assets/copilotkit/), on a page of the site's own origin,
signed in as a person, through daphne and the real worker.

What is held here: CopilotChat shows the reply of a read and of a write; an approval is CopilotKit's
`useInterrupt` card, and its Approve runs the action once (its Deny runs nothing), the reply follows, and the
person's next message is answered (CopilotKit resumes under the runId of the run that asked; read as a re-attach,
that answered nothing and left CopilotKit refusing every message after); a member's answer that is the reply (a
handoff) is one answer bubble. The page makes no request but to the site."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from assistant.mcp.tokens import token_create
from assistant.models import AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from tests.browser.harness import BROWSER_MARKS, log_in, screenshot
from tests.conftest import PROJECT_DIR
from tracker.models import Project, Task

pytestmark = BROWSER_MARKS

ASSETS = PROJECT_DIR / "tests" / "assets"
PAGE_PATH = "/copilotkit-test/"
# A host's page with CopilotKit's chat in it (the bundle's `CopilotKitPage.mount`: the provider with the agent,
# CopilotChat, and the approval card of useInterrupt), talking to the endpoint with HEADERS: the session's CSRF
# token, or an access token.
SESSION_HEADERS = '{"X-CSRFToken": csrf}'
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>CopilotKit</title>
<link rel="stylesheet" href="/copilotkit-test/copilotkit.css">
<script src="/copilotkit-test/copilotkit.js"></script></head>
<body style="margin:0"><main id="app" style="height:100vh"></main>
<script>
  const csrf = (document.cookie.match(/(?:^|; )csrftoken=([^;]*)/) || [])[1] || "";
  window.agent = CopilotKitPage.mount(document.getElementById("app"), {
    url: "/assistant/ag-ui/", headers: HEADERS, threadId: "copilotkit-thread"});
</script></body></html>"""
ASSISTANT = ".copilotKitMessage.copilotKitAssistantMessage"
CARD = ".approval-card"


class CopilotPage:
    """The page, what it asked of anyone but the site, and the errors it logged. `headers`: what its agent sends
    with each request, as a JavaScript object (by default the session's CSRF token)."""

    def __init__(self, page: Any, site_url: str, headers: str = SESSION_HEADERS) -> None:
        self.page, self.site_url, self.headers = page, site_url, headers
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
        page.route(self.site_url + PAGE_PATH, lambda route: route.fulfill(
            body=PAGE.replace("HEADERS", self.headers), content_type="text/html"))
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

    def run_ended(self) -> None:
        """Wait until the agent's run has ended: whatever the stream says last has been shown."""
        self.page.wait_for_function("() => window.agent.messages.length > 0 && !window.agent.isRunning",
                                    timeout=30_000)


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


def test_copilotkit_shows_a_members_answer_to_the_person_as_one_reply(
    page: Any, site_url: str, fake_openai: FakeOpenAIServer, alice: Any
) -> None:
    """The desk asks the clerk alone, and the clerk's answer is the reply (a handoff): CopilotKit shows it once,
    as the clerk's text, and not again when the run ends."""
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the fence", created_by=alice)
    made = token_create(owner=alice, name="CopilotKit", spec="test-desk")
    copilot = CopilotPage(page, site_url, headers=json.dumps({"Authorization": f"Bearer {made.secret}"}))
    copilot.open()
    answer = "You have one open task: Fix the fence."
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "List the person's open tasks."})]),
        openai_stream([], [("k1", "tracker_task_list", {})]),
        openai_stream(["You have one open task: ", "Fix the fence."]),
    )

    # Two questions in one: the desk's model decides, and asks the clerk alone.
    copilot.send("What's left for me to do this week, and is anything overdue?")

    copilot.replied(answer)
    copilot.run_ended()
    expect(page.locator(ASSISTANT).filter(has_text=answer)).to_have_count(1)
    top = AgentRun.objects.get(parent__isnull=True)
    assert (top.status, top.reply, top.answered_by.spec) == ("succeeded", answer, "test-clerk")
    screenshot(page, "copilotkit-handoff")
    assert copilot.elsewhere == [] and copilot.errors == []
