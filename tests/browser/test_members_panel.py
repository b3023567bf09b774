"""A run that hands work to a member, as the person sees it in the panel, in Chromium, through daphne, the
real worker and the channel layer: the member's steps nest under the step that asked it as they happen,
named for the member; the member's approval card says which member asks, and approving it (with the
keyboard) answers the member's own step; a reload while it waits and a reload once all is done show the
same nesting; and the nested block passes the accessibility check.

The society is the test settings' own (tests/settings.py): a chat under `test-asker`, which may ask
`test-clerk`; every model is the fake OpenAI server's, answering the calls in the order they are made.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from assistant.models import AgentChat, AgentRun
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from tests.browser.harness import (
    BROWSER_MARKS,
    axe_violations,
    describe_violations,
    log_in,
    screenshot,
    wait_for_replies,
)
from tests.conftest import WorkerProcess
from tracker.models import Project, Task

pytestmark = BROWSER_MARKS

CONV = "[data-assistant-conversation]"
THREAD = f"{CONV} [data-assistant-thread]"
DELEGATION = f"{THREAD} .assistant-step.is-delegation"
MEMBER = f"{THREAD} .assistant-member"
REPLY = "The clerk deleted the old chore."
DELETED = re.compile("Old chore.*deleted|Done: Delete the task", re.IGNORECASE)


def _nesting(page: Any) -> dict[str, Any]:
    """Where the member's block sits, as the DOM has it: right after the step that asked it, inside the
    top run's one block of steps."""
    return page.evaluate(
        """(thread) => {
            const root = document.querySelector(thread);
            const asked = root.querySelector(".assistant-step.is-delegation");
            const member = root.querySelector(".assistant-member");
            return {
                topBlocks: root.querySelectorAll(":scope > .assistant-steps").length,
                members: root.querySelectorAll(".assistant-member").length,
                afterAsking: !!(asked && member && asked.nextElementSibling === member),
                askedIn: member && member.dataset.askedIn, askingStep: asked && asked.dataset.stepId,
                inTopBlock: !!(member && member.closest(".assistant-steps")),
                drafts: root.querySelectorAll(".assistant-message.is-draft").length,
            };
        }""",
        THREAD,
    )


def _watch_drafts(page: Any) -> None:
    """Record the text of every reply draft the chat shows, as it streams."""
    page.evaluate(
        """(thread) => {
            window.__drafts = [];
            new MutationObserver(() => {
                document.querySelectorAll(thread + " .assistant-message.is-draft").forEach((draft) => {
                    if (!window.__drafts.includes(draft.textContent)) window.__drafts.push(draft.textContent);
                });
            }).observe(document.querySelector(thread), {subtree: true, childList: true, characterData: true});
        }""",
        THREAD,
    )


def _assert_nested(page: Any) -> None:
    where = _nesting(page)
    assert where["topBlocks"] == 1 and where["members"] == 1, where
    assert where["afterAsking"] and where["inTopBlock"], where
    assert where["askedIn"] == where["askingStep"], where
    assert where["drafts"] == 0, where  # nothing of the member's streamed into the chat's reply


def test_a_members_steps_nest_under_the_step_that_asked_it_live_at_its_approval_and_after_reloads(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    chore = Task.objects.create(project=home, title="Old chore")
    keep = Task.objects.create(project=home, title="Keep me")
    AgentChat.objects.create(owner=alice, spec="test-asker")  # the person's current chat
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": f"Delete the task {chore.pk}."})]),
        openai_stream(["Deleting it."], [("k1", "tracker_task_delete", {"pk": chore.pk})]),
        openai_stream(["Deleted it."]),
        openai_stream([REPLY]),
    )
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    _watch_drafts(page)
    page.fill(f"{CONV} [data-assistant-input]", "delete the old chore")
    page.press(f"{CONV} [data-assistant-input]", "Enter")

    # Live: the delegation step says whom it asked and what; the member's steps and its question sit
    # nested right under it, and its block says in words whose steps they are and that it waits.
    card = page.locator(f"{MEMBER} .assistant-confirm")
    expect(card).to_be_visible()
    expect(page.locator(DELEGATION)).to_contain_text(f"Asked test-clerk: Delete the task {chore.pk}.")
    expect(card).to_contain_text("test-clerk asks: Delete the task “Old chore”")
    expect(card).to_have_attribute("aria-label", "Approval needed for step 2 of test-clerk: Delete a task")
    expect(page.locator(f"{MEMBER} > summary")).to_have_text(
        "Steps of test-clerk: waiting for your approval (2 steps)")
    expect(page.locator(f"{MEMBER} .assistant-step").first).to_contain_text("Decided on: delete a task")
    expect(page.locator(f"{THREAD} > .assistant-steps > details > summary")).to_contain_text(
        "Waiting for your approval")
    _assert_nested(page)
    # The member streamed "Deleting it." before its call: shown in its own block, never in the chat's reply.
    assert not any("Deleting it" in text for text in page.evaluate("window.__drafts")), page.evaluate("window.__drafts")
    # The tree waits for the person: a new message could take its place, so the button says Send.
    expect(page.locator(f"{CONV} [data-assistant-send]")).to_have_text("Send")

    screenshot(page.locator(CONV), "members-waiting")
    # The nested block and its card, through axe, in light and dark.
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found = axe_violations(page, CONV)
        assert not found, f"[{scheme}]\n{describe_violations(found)}"

    # A reload while the member waits: the same nesting, drawn from the load's `members`.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    expect(card).to_be_visible()
    expect(card).to_contain_text("test-clerk asks:")
    _assert_nested(page)
    clerk = AgentRun.objects.get(spec="test-clerk")
    assert card.get_attribute("data-step-id") == str(clerk.steps.get(kind="tool_call").pk)

    # Approving with the keyboard: the card's Approve has focus, Enter answers the member's own step.
    approve = card.locator("[data-confirm=approve]")
    expect(approve).to_be_focused()
    page.keyboard.press("Enter")
    wait_for_replies(page, 1, within=CONV)
    expect(page.locator(f"{THREAD} .assistant-message.is-assistant .assistant-message-body").last).to_have_text(REPLY)
    expect(page.locator(DELEGATION)).to_contain_text("test-clerk answered: Deleted it.")
    expect(page.locator(f"{MEMBER} > summary")).to_have_text("Steps of test-clerk: answered (3 steps)")
    expect(page.locator(f"{MEMBER} .assistant-step.is-done")).to_contain_text(DELETED)
    expect(page.locator(f"{MEMBER} .assistant-confirm")).to_have_count(0)
    _assert_nested(page)
    clerk.refresh_from_db()
    top = AgentRun.objects.get(spec="test-asker")
    assert (top.status, clerk.status, clerk.parent_id) == ("succeeded", "succeeded", top.pk)
    assert clerk.steps.get(kind="tool_call").confirmation == "approved"
    assert not Task.objects.filter(pk=chore.pk).exists() and Task.objects.filter(pk=keep.pk).exists()

    # Once all is done, a reload draws the past tree from `runs`: folded away, the same nesting inside.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    wait_for_replies(page, 1, within=CONV)
    _assert_nested(page)
    page.click(f"{THREAD} > .assistant-steps > details > summary")
    expect(page.locator(DELEGATION)).to_be_visible()
    expect(page.locator(DELEGATION)).to_contain_text("test-clerk answered: Deleted it.")
    member = page.locator(f"{MEMBER} > summary")
    expect(member).to_have_text("Steps of test-clerk: answered (3 steps)")
    expect(page.locator(f"{MEMBER} .assistant-step").first).to_be_hidden()  # a past member's steps start folded
    member.focus()
    page.keyboard.press("Enter")  # a native <summary>: the keyboard opens it
    expect(page.locator(f"{MEMBER} .assistant-step.is-done")).to_be_visible()
    expect(page.locator(f"{MEMBER} .assistant-step.is-done")).to_contain_text(DELETED)
    screenshot(page.locator(CONV), "members-past")


def test_a_member_that_could_not_finish_ends_only_its_own_block_and_the_run_that_asked_it_goes_on(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    AgentChat.objects.create(owner=alice, spec="test-asker")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "List my tasks."})]),
        # The clerk asks for the same list three times in a row: its run fails (repeated_tool_call).
        *[openai_stream([], [(f"k{n}", "tracker_task_list", {})]) for n in range(3)],
        openai_stream(["The clerk could not list them."]),
    )
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    # From the moment the member's block stops working until the top run's reply: what the button says.
    page.evaluate(
        """([conv, thread]) => {
            window.__buttons = [];
            const root = document.querySelector(thread);
            new MutationObserver(() => {
                const member = root.querySelector(".assistant-member");
                const replied = root.querySelector(".assistant-message.is-assistant:not(.is-draft)");
                if (member && !member.classList.contains("is-working") && !replied) {
                    window.__buttons.push(document.querySelector(conv + " [data-assistant-send]").textContent);
                }
            }).observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
        }""",
        [CONV, THREAD],
    )
    page.fill(f"{CONV} [data-assistant-input]", "list my tasks")
    page.press(f"{CONV} [data-assistant-input]", "Enter")
    wait_for_replies(page, 1, within=CONV)

    expect(page.locator(f"{MEMBER} > summary")).to_have_text("Steps of test-clerk: could not finish (5 steps)")
    expect(page.locator(DELEGATION)).to_contain_text("test-clerk could not finish: The assistant stopped: it asked "
                                                     "for the same action (tracker_task_list) 3 times in a row.")
    expect(page.locator(f"{THREAD} .assistant-message.is-assistant .assistant-message-body")).to_have_text(
        "The clerk could not list them.")
    # The member's failure is its own: no error in the chat, and the run that asked it kept the Stop button.
    expect(page.locator(f"{THREAD} .assistant-message.is-error")).to_have_count(0)
    buttons = page.evaluate("window.__buttons")
    assert buttons and set(buttons) == {"Stop"}, buttons
    expect(page.locator(f"{CONV} [data-assistant-send]")).to_have_text("Send")
    _assert_nested(page)
    top = AgentRun.objects.get(spec="test-asker")
    clerk = AgentRun.objects.get(spec="test-clerk")
    assert (top.status, clerk.status, clerk.stop_reason) == ("succeeded", "failed", "repeated_tool_call")
