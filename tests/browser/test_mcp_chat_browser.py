"""The record of the person's own agent in their panel, in Chromium through daphne (issue 21): the agent's
calls are made here through the MCP endpoint's own code (`assistant.mcp.calls`, as its `tools/call` runs
them), and the panel hears of them live like any run.

What is held here: the agent's chat appears in the list as it calls, with a badge that says "Your agent" in
words, without taking the person from the chat they are in; opened, it shows each call and its outcome and a
note in place of the composer; its approval card is answered in the panel, after which the run waits for the
agent (no spinner, the server's words) across a reload, and runs once when the agent calls again; "New chat"
leads back to a chat of their own. The agent's chat passes the accessibility check in light and dark."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from assistant.mcp.calls import Caller, approval_summary, run_open, step_run, step_take, waiting_call
from assistant.mcp.tokens import token_create
from assistant.models import AgentChat, AgentMessage, AgentRun
from assistant.tools import Tool, tools_for
from tests.browser.harness import BROWSER_MARKS, axe_violations, describe_violations, log_in, screenshot
from tracker.models import Project

pytestmark = BROWSER_MARKS

CONV = "[data-assistant-conversation]"
THREAD = f"{CONV} [data-assistant-thread]"
CHATS = f"{CONV} [data-assistant-chat-list]"
AGENT_ROW = f"{CHATS} .assistant-chat-row.is-agent"
NOTE = f"{CONV} [data-assistant-agent-note]"
FORM = f"{CONV} [data-assistant-form]"
NOTE_TEXT = "This chat shows what your agent “Laptop” did as you. Start a new chat to talk to the assistant."
WAITS_FOR_AGENT = "Approved; it runs when your agent calls it again."


def _tool(caller: Caller, name: str) -> Tool:
    return {tool.name: tool for tool in tools_for(caller.user, caller.token.spec, caller.profile)}[name]


def _open(page: Any, site_url: str) -> None:
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")


def _focused(page: Any) -> str:
    """What has the focus: its tag, and its text or label."""
    return page.evaluate("""() => { const node = document.activeElement;
        return node.tagName.toLowerCase() + ":" + (node.getAttribute("aria-label") || node.textContent.trim()); }""")


def test_the_persons_agent_shows_as_its_own_chat_they_read_approve_in_and_leave(
    page: Any, site_url: str, alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    own = AgentChat.objects.create(owner=alice, title="My own question")
    AgentMessage.objects.create(chat=own, owner=alice, role="user", content="What is due this week?")
    caller = Caller(user=alice, token=token_create(owner=alice, name="Laptop", spec="default").token)

    log_in(page, site_url, "alice")
    _open(page, site_url)
    expect(page.locator(f"{CONV} [data-assistant-chat-title]")).to_have_text("My own question")
    page.focus(f"{CONV} [data-assistant-input]")
    page.keyboard.type("half a thought")

    # The agent calls: its chat appears in the list, said in words; the person stays where they were.
    run, step = run_open(caller, _tool(caller, "tracker_project_list"), {})
    step_run(caller, run, step)
    expect(page.locator(AGENT_ROW)).to_have_count(1)
    row = page.locator(f"{AGENT_ROW} .assistant-chat-open")
    expect(row).to_contain_text("Laptop")
    expect(row.locator(".assistant-chat-badge")).to_have_text("Your agent")
    assert row.evaluate("(node) => node.textContent").startswith("Laptop, Your agent")
    expect(page.locator(f"{CONV} [data-assistant-chat-title]")).to_have_text("My own question")
    expect(page.locator(THREAD)).to_contain_text("What is due this week?")
    assert "called tracker_project_list" not in page.inner_text(THREAD)
    assert _focused(page).startswith("textarea")
    assert page.input_value(f"{CONV} [data-assistant-input]") == "half a thought"

    # Opened: each call and what came of it, and a note in place of the composer, with the way out focused.
    row.click()
    expect(page.locator(THREAD)).to_contain_text("Your agent “Laptop” called tracker_project_list.")
    expect(page.locator(THREAD)).to_contain_text("Read 1 result.")
    # Its lines are the record of each call, not the person's words: they read apart from hers.
    expect(page.locator(f"{THREAD} .assistant-message.is-user.is-agent-call")).to_have_count(1)
    expect(page.locator(NOTE)).to_be_visible()
    expect(page.locator(f"{NOTE} p")).to_have_text(NOTE_TEXT)
    expect(page.locator(FORM)).to_be_hidden()
    assert _focused(page) == "button:New chat"
    assert page.locator(f"{THREAD} [data-retry]").count() == 0  # nobody sends in it, so nothing to retry

    # A call the panel would pause on: its card shows live in the open chat, and is answered here.
    arguments = {"pk": garden.pk}
    delete = _tool(caller, "tracker_project_delete")
    asked, _ = run_open(caller, delete, arguments, summary=approval_summary(caller, delete, arguments))
    card = page.locator(f"{THREAD} .assistant-confirm")
    expect(card).to_be_visible()
    expect(card).to_contain_text("Garden")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found = axe_violations(page, CONV)
        assert not found, f"[{scheme}]\n{describe_violations(found)}"
    page.emulate_media(color_scheme="light")
    screenshot(page, "mcp-agent-chat")
    card.locator("[data-confirm=approve]").click()
    expect(card).to_have_count(0)
    block = page.locator(f'{THREAD} .assistant-steps[data-run-id="{asked.pk}"]')
    summary = block.locator(".assistant-run-steps-summary")
    expect(summary).to_have_text(f"{WAITS_FOR_AGENT} (1 step)")
    expect(block.locator(".assistant-thinking")).to_have_count(0)
    expect(block.locator(".assistant-step-text")).to_have_text("Approved: " + asked.steps.get().summary)
    assert AgentRun.objects.get(pk=asked.pk).status == "awaiting_confirmation"  # it waits for the agent
    assert Project.objects.filter(pk=garden.pk).exists()

    # After a reload, the same: built from the server's rows, still waiting for the agent, no spinner.
    _open(page, site_url)
    expect(page.locator(f"{CONV} [data-assistant-chat-title]")).to_have_text("My own question")
    page.click(f"{AGENT_ROW} .assistant-chat-open")
    expect(block.locator(".assistant-run-steps-summary")).to_have_text(f"{WAITS_FOR_AGENT} (1 step)")
    expect(block.locator(".assistant-thinking")).to_have_count(0)
    expect(page.locator(FORM)).to_be_hidden()

    # The agent calls again with the same arguments: the approved call runs, once, and its reply shows.
    waiting = waiting_call(caller, delete, arguments)
    assert waiting is not None and waiting[0].pk == asked.pk
    assert step_take(waiting[1], answered=False)
    step_run(caller, *waiting)
    expect(block.locator(".assistant-step.is-done")).to_have_count(1)
    reply = page.locator(f'{THREAD} .assistant-message.is-assistant[data-run-id="{asked.pk}"] .assistant-message-body')
    expect(reply).to_have_text("Project “Garden” deleted.")
    expect(block.locator(".assistant-thinking")).to_have_count(0)
    assert not Project.objects.filter(pk=garden.pk).exists()

    # "New chat" leads back to a chat of the person's own, its composer ready.
    page.click(f"{NOTE} [data-assistant-agent-new-chat]")
    expect(page.locator(FORM)).to_be_visible()
    expect(page.locator(NOTE)).to_be_hidden()
    expect(page.locator(f"{CONV} [data-assistant-chat-title]")).to_have_text("New chat")
    assert _focused(page).startswith("textarea")


def test_the_agents_chat_in_the_dock_shows_its_badge_and_note(page: Any, site_url: str, alice: Any) -> None:
    caller = Caller(user=alice, token=token_create(owner=alice, name="Laptop", spec="default").token)
    run, step = run_open(caller, _tool(caller, "tracker_project_list"), {})
    step_run(caller, run, step)

    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    dock = "#assistant-dock"
    page.wait_for_selector(f"{dock} [data-assistant-status].is-connected")
    page.click(f"{dock} [data-assistant-chats-toggle]")
    agent = page.locator(f"{dock} .assistant-chat-row.is-agent .assistant-chat-open")
    expect(agent.locator(".assistant-chat-badge")).to_have_text("Your agent")
    agent.click()
    expect(page.locator(f"{dock} [data-assistant-thread]")).to_contain_text("Your agent “Laptop” called")
    expect(page.locator(f"{dock} [data-assistant-agent-note] p")).to_have_text(NOTE_TEXT)
    expect(page.locator(f"{dock} [data-assistant-form]")).to_be_hidden()
    # The note and its button fit the dock's width.
    assert page.evaluate("""(selector) => { const note = document.querySelector(selector);
        return note.scrollWidth <= note.clientWidth; }""", f"{dock} [data-assistant-agent-note]")
    screenshot(page, "mcp-agent-chat-dock")
