"""A member that answers the person itself, as the person sees it, in Chromium, through daphne, the real worker and
the channel layer, with the site's demo society and its offline model (no key): "Add the task 'Buy milk' to the
project 'Home'" is plainly the clerk's, so the orchestrator's run becomes the clerk's without a model call, and the
clerk's answer is the reply. The panel shows ONE answer bubble for it, streamed where replies stream and named for
the clerk, after the step that says why it went to the clerk; a reload and the full /assistant/ page show the same
single named bubble; and axe-core finds nothing serious on the panel.

On the test settings' `test-router` society (the suite's fake provider, answering the calls in the order they are
made), where the router's model asks a member alone (a handoff): what the member writes before it calls a tool is
not its answer, and leaves the reply's place once it calls one, so the reply never reads as two; and a member asked
alone that could not do the work hands nothing over: the one answer is the asker's own, naming nobody."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from assistant.models import AgentChat, AgentMessage, AgentRun
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
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
from tests.conftest import WorkerProcess
from tracker.models import Project, Task

pytestmark = BROWSER_MARKS

DOCK = "#assistant-dock"
THREAD = f"{DOCK} [data-assistant-thread]"
BUY_MILK = "Add the task 'Buy milk' to the project 'Home'"
ROUTED = "routed to clerk: intent tracker_task_create, the only member that may do it"


@pytest.fixture(scope="module")
def site_model() -> None:
    """The site as a fresh machine runs it: no model configured, so the offline demo model answers."""
    return None


def _watch_drafts(page: Any, thread: str) -> None:
    """Record, as the reply streams, each reply draft's text and name, and whether any member's own draft (the
    one inside its nested block) ever showed."""
    page.evaluate(
        """(thread) => {
            const root = document.querySelector(thread);
            window.__replyDrafts = [];
            window.__memberDrafts = 0;
            new MutationObserver(() => {
                root.querySelectorAll(".assistant-message.is-draft").forEach((draft) => {
                    const body = draft.querySelector(".assistant-message-body");
                    const named = draft.querySelector(".assistant-message-member");
                    window.__replyDrafts.push({text: body ? body.textContent : draft.textContent,
                                               named: named ? named.textContent : null});
                });
                window.__memberDrafts += root.querySelectorAll(".assistant-member-draft").length;
            }).observe(root, {subtree: true, childList: true, characterData: true});
        }""",
        thread,
    )


def _times_said(page: Any, thread: str, answer: str) -> int:
    """How often the answer reads in the thread with every step and member block opened: what a person who
    opens everything would read."""
    return page.evaluate(
        """([thread, answer]) => {
            const root = document.querySelector(thread);
            root.querySelectorAll("details").forEach((details) => { details.open = true; });
            return root.innerText.split(answer).length - 1;
        }""",
        [thread, answer],
    )


def _assert_one_named_answer(page: Any, thread: str, answer: str) -> None:
    bubbles = page.locator(f"{thread} .assistant-message.is-assistant")
    expect(bubbles).to_have_count(1)
    expect(page.locator(f"{thread} .assistant-message.is-draft")).to_have_count(0)
    expect(bubbles.locator(".assistant-message-member")).to_have_text("Answered by clerk")
    expect(bubbles.locator(".assistant-message-body")).to_have_text(answer)
    assert _times_said(page, thread, answer) == 1, page.locator(thread).inner_text()


def test_a_member_that_answers_the_person_shows_one_answer_bubble_naming_it_live_after_a_reload_and_on_the_page(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    AgentChat.objects.create(owner=alice, spec="orchestrator")  # the site's default spec, as a new chat has it
    log_in(page, site_url, "alice")
    page.goto(site_url + "/tracker/")
    page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    _watch_drafts(page, THREAD)

    ask(page, BUY_MILK, within=DOCK)

    # The server's account: plainly the clerk's, so the one run became the clerk's with no model call of the
    # orchestrator's; its answer is the reply, stored once, naming the clerk.
    run = AgentRun.objects.get(owner=alice)
    answer = run.reply
    assert (run.status, run.spec, run.routed_from) == ("succeeded", "clerk", "orchestrator"), answer
    replies = AgentMessage.objects.filter(chat=run.chat, role="assistant")
    assert [(reply.content, reply.member) for reply in replies] == [(answer, "clerk")]
    assert Task.objects.filter(project=home, title="Buy milk").count() == 1

    # Live: the clerk's words streamed where a reply streams, already named, and never inside its own block.
    drafts = page.evaluate("window.__replyDrafts")
    assert drafts and drafts[-1] == {"text": answer, "named": "Answered by clerk"}, drafts
    assert page.evaluate("window.__memberDrafts") == 0
    screenshot(page.locator(DOCK), "handoff-live")
    # One bubble, the clerk's answer, naming it; the steps say why it went to the clerk without saying it again.
    _assert_one_named_answer(page, THREAD, answer)
    expect(page.locator(f"{THREAD} .assistant-step.is-notice .assistant-step-text")).to_have_text(ROUTED)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found = axe_violations(page, DOCK)
        assert not found, f"[{scheme}]\n{describe_violations(found)}"
    page.emulate_media(color_scheme="light")

    # A reload draws it from the load: the same one bubble, the same name, the steps folded until opened.
    page.reload()
    if not page.locator(f"{DOCK}:not([hidden])").count():
        page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    wait_for_replies(page, 1, within=DOCK)
    screenshot(page.locator(DOCK), "handoff-reloaded")
    _assert_one_named_answer(page, THREAD, answer)
    expect(page.locator(f"{THREAD} .assistant-step.is-notice .assistant-step-text")).to_have_text(ROUTED)

    # The full page is the same conversation, drawn by the same code.
    page.goto(site_url + "/assistant/")
    conversation = "[data-assistant-conversation]"
    page.wait_for_selector(f"{conversation} [data-assistant-status].is-connected")
    wait_for_replies(page, 1, within=conversation)
    _assert_one_named_answer(page, f"{conversation} [data-assistant-thread]", answer)
    assert page.locator(f"{conversation} {FINAL_REPLIES}").count() == 1


def test_what_a_member_writes_before_calling_a_tool_leaves_the_reply_which_is_its_answer_alone(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    AgentChat.objects.create(owner=alice, spec="test-router")
    # Words that name no one tool: the router's model decides, and asks the clerk alone (its answer is the reply).
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": BUY_MILK})]),
        openai_stream(["Let me add it."], [("c1", "tracker_task_create", {"project": home.pk, "title": "Buy milk"})]),
        openai_stream(["Added “Buy milk” to Home."]),
    )
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    conversation = "[data-assistant-conversation]"
    thread = f"{conversation} [data-assistant-thread]"
    page.wait_for_selector(f"{conversation} [data-assistant-status].is-connected")
    _watch_drafts(page, thread)
    # Whether the clerk's words before its call still stood as the reply once its call was under way.
    page.evaluate(
        """(thread) => {
            const root = document.querySelector(thread);
            window.__staleDraft = false;
            new MutationObserver(() => {
                const draft = root.querySelector(".assistant-message.is-draft");
                const acting = root.querySelector(".assistant-member .assistant-step:not(.is-model)");
                if (draft && acting && draft.textContent.includes("Let me add it")) window.__staleDraft = true;
            }).observe(root, {subtree: true, childList: true, characterData: true});
        }""",
        thread,
    )

    ask(page, "Hello! Please sort this out for me.", within=conversation)

    top = AgentRun.objects.get(owner=alice, parent__isnull=True)
    clerk = AgentRun.objects.get(owner=alice, parent=top)
    assert (top.reply, top.answered_by_id, top.steps.filter(kind="model_call").count()) == (
        "Added “Buy milk” to Home.", clerk.pk, 1)
    bubbles = page.locator(f"{thread} .assistant-message.is-assistant")
    expect(bubbles).to_have_count(1)
    expect(bubbles.locator(".assistant-message-member")).to_have_text("Answered by test-clerk")
    expect(bubbles.locator(".assistant-message-body")).to_have_text("Added “Buy milk” to Home.")
    drafts = page.evaluate("window.__replyDrafts")
    assert drafts and drafts[-1] == {"text": "Added “Buy milk” to Home.", "named": "Answered by test-clerk"}, drafts
    assert not [draft for draft in drafts if "Let me add it" in draft["text"] and "Added" in draft["text"]], drafts
    assert page.evaluate("window.__staleDraft") is False
    assert Task.objects.filter(project=home, title="Buy milk").count() == 1


def test_a_member_that_could_not_do_it_hands_nothing_over_and_the_one_answer_is_the_askers(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-viewer", {"task": "Add the task 'Sneaky' to Home."})]),
        # The viewer only reads: its create is denied, so its answer is not the reply.
        openai_stream([], [("v1", "tracker_task_create", {"project": home.pk, "title": "Sneaky"})]),
        openai_stream(["I may only read; I could not add it."]),
        openai_stream(["The reader could not add it; nothing was added."]),
    )
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    conversation = "[data-assistant-conversation]"
    thread = f"{conversation} [data-assistant-thread]"
    page.wait_for_selector(f"{conversation} [data-assistant-status].is-connected")
    # Whether, once the step that asked the viewer said it could not finish, anything it wrote stood in the chat
    # as a reply (the server streams none of it as the reply once its action failed; the panel drops any that was).
    page.evaluate(
        """(thread) => {
            const root = document.querySelector(thread);
            window.__staleDraft = false;
            const asked = ":scope > .assistant-steps > details > .assistant-run-steps-list > .is-delegation";
            new MutationObserver(() => {
                const named = root.querySelector(".assistant-message.is-draft .assistant-message-member");
                if (named && root.querySelector(asked + ".is-failed")) window.__staleDraft = true;
            }).observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
        }""",
        thread,
    )

    # Words that name no one tool: the router's model decides (the fake provider's first answer is its).
    ask(page, "Hello! Please sort this out for me.", within=conversation)

    top = AgentRun.objects.get(owner=alice, parent__isnull=True)
    assert top.spec == "test-router" and not top.routed_from
    assert (top.reply, top.answered_by_id) == ("The reader could not add it; nothing was added.", None)
    assert top.steps.get(tool_name="ask_test-viewer").result["status"] == "escalated"
    bubbles = page.locator(f"{thread} .assistant-message.is-assistant")
    expect(bubbles).to_have_count(1)
    expect(bubbles.locator(".assistant-message-body")).to_have_text(top.reply)
    expect(bubbles.locator(".assistant-message-member")).to_have_count(0)
    expect(page.locator(f"{thread} .assistant-message.is-draft")).to_have_count(0)
    expect(page.locator(f"{thread} .assistant-message", has_text="I may only read")).to_have_count(0)
    assert page.evaluate("window.__staleDraft") is False
    assert not Task.objects.filter(project=home, title="Sneaky").exists()
