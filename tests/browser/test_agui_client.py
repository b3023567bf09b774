"""A real AG-UI frontend in Chromium: the reference client from npm (`@ag-ui/client`'s HttpAgent, bundled in
tests/assets/ag-ui-client.min.js) on a page of the site's own origin, signed in as a person, talks to the AG-UI
endpoint through daphne and the real worker.

What is held here: the client's own verifier accepts every stream; the person sees the reply and the tool call
with its result; an approval arrives as the client's pending interrupt, and answered through the client's
resume it runs once and the reply follows; the session's CSRF token is what a same-site page sends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from assistant.models import AgentRun, AgentStep
from tests.browser.harness import BROWSER_MARKS, log_in, screenshot
from tests.conftest import PROJECT_DIR
from tracker.models import Project

pytestmark = BROWSER_MARKS

CLIENT = PROJECT_DIR / "tests" / "assets" / "ag-ui-client.min.js"
PAGE_PATH = "/agui-test/"
# A page as a host's own AG-UI frontend would be: the agent, a list of what it said, a box to type in, and a
# card for an approval. It renders the agent's messages (the client keeps them) after every change.
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>AG-UI client</title>
<style>body{font:15px system-ui;margin:2rem;max-width:40rem} li{margin:.4rem 0} .tool{color:#555}
.card{border:1px solid #c60;padding:.6rem;margin:.6rem 0}</style>
<script src="/agui-test/client.js"></script></head>
<body><h1>My app's copilot</h1>
<ol id="messages" aria-live="polite"></ol>
<div id="approval" class="card" hidden><p id="question"></p>
  <button id="approve">Approve</button> <button id="decline">Decline</button></div>
<form id="ask"><label>Ask <input id="text" autocomplete="off"></label> <button>Send</button></form>
<p id="status">idle</p>
<script>
  const csrf = (document.cookie.match(/(?:^|; )csrftoken=([^;]*)/) || [])[1] || "";
  const agent = new AgUiClient.HttpAgent({url: "/assistant/ag-ui/", headers: {"X-CSRFToken": csrf},
                                          threadId: "browser-thread"});
  window.agent = agent;
  window.seen = [];
  const list = document.getElementById("messages");
  function render() {
    list.replaceChildren();
    for (const message of agent.messages) {
      if (message.role === "tool") {
        const item = document.createElement("li");
        item.className = "tool";
        item.textContent = "result: " + message.content.slice(0, 120);
        list.append(item);
        continue;
      }
      if (message.content) {
        const item = document.createElement("li");
        item.textContent = message.role + ": " + message.content;
        item.dataset.role = message.role;
        list.append(item);
      }
      for (const call of message.toolCalls || []) {
        const item = document.createElement("li");
        item.className = "tool";
        item.textContent = "called " + call.function.name + " " + call.function.arguments;
        list.append(item);
      }
    }
    const waiting = agent.pendingInterrupts[0];
    document.getElementById("approval").hidden = !waiting;
    document.getElementById("question").textContent = waiting ? waiting.message + "?" : "";
  }
  async function run(parameters) {
    document.getElementById("status").textContent = "working";
    try {
      await agent.runAgent(parameters, {onEvent: ({event}) => { window.seen.push(event.type); },
                                        onMessagesChanged: render});
      document.getElementById("status").textContent = agent.pendingInterrupts.length ? "waiting" : "done";
    } catch (error) {
      document.getElementById("status").textContent = "error: " + error.message;
    }
    render();
  }
  document.getElementById("ask").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    const box = document.getElementById("text");
    agent.addMessage({id: crypto.randomUUID(), role: "user", content: box.value});
    box.value = "";
    render();
    run({});
  });
  for (const [id, approve] of [["approve", true], ["decline", false]]) {
    document.getElementById(id).addEventListener("click", () => {
      const resume = agent.pendingInterrupts.map((interrupt) => (
        {interruptId: interrupt.id, status: "resolved", payload: {approve}}));
      run({resume});
    });
  }
</script></body></html>"""


def _open(page: Any, site_url: str) -> None:
    """The frontend's page, served on the site's origin (a same-site frontend), with the bundled client."""
    page.route(site_url + PAGE_PATH, lambda route: route.fulfill(body=PAGE, content_type="text/html"))
    page.route(site_url + PAGE_PATH + "client.js",
               lambda route: route.fulfill(path=str(CLIENT), content_type="text/javascript"))
    page.goto(site_url + PAGE_PATH)
    page.wait_for_function("() => typeof window.agent === 'object'")


def _ask(page: Any, text: str, until: str) -> None:
    page.fill("#text", text)
    page.click("#ask button")
    expect(page.locator("#status")).to_have_text(until, timeout=30_000)


def test_the_reference_client_runs_a_turn_and_sees_the_reply_and_the_tool_call(
    page: Any, site_url: str, model_script: Callable[..., None], alice: Any
) -> None:
    Project.objects.create(owner=alice, name="Garden")
    model_script({"text": "Let me look.", "tool_calls": [{"name": "tracker_project_list", "arguments": {}}]},
                 {"text": "You have one project: Garden."})
    log_in(page, site_url, "alice")
    _open(page, site_url)

    _ask(page, "Which projects do I have?", "done")

    items = page.locator("#messages li")
    expect(items.filter(has_text="user: Which projects do I have?")).to_have_count(1)
    expect(items.filter(has_text="called tracker_project_list")).to_have_count(1)
    expect(items.filter(has_text='result: {"data": {"results": [{"id"')).to_have_count(1)
    expect(items.filter(has_text="assistant: You have one project: Garden.")).to_have_count(1)
    expect(items.filter(has_text="assistant: Let me look.")).to_have_count(1)
    seen = page.evaluate("window.seen")
    assert seen[0] == "RUN_STARTED" and seen[-1] == "RUN_FINISHED"
    assert {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT",
            "STEP_STARTED", "STEP_FINISHED"} <= set(seen)
    screenshot(page, "agui-client-turn")
    run = AgentRun.objects.get()
    assert (run.status, run.reply, run.channel) == ("succeeded", "You have one project: Garden.", "panel")
    assert run.session_digest and run.config["agui"]["thread_id"] == "browser-thread"


def test_an_approval_is_the_clients_interrupt_and_its_resume_runs_the_action_once(
    page: Any, site_url: str, model_script: Callable[..., None], alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": garden.pk}}]},
                 {"text": "Deleted the project Garden."})
    log_in(page, site_url, "alice")
    _open(page, site_url)

    _ask(page, "Delete Garden", "waiting")

    expect(page.locator("#approval")).to_be_visible()
    expect(page.locator("#question")).to_contain_text("Delete the project “Garden”")
    expect(page.locator("#messages li").filter(has_text="called tracker_project_delete")).to_have_count(1)
    assert Project.objects.filter(pk=garden.pk).exists()
    screenshot(page, "agui-client-interrupt")

    page.click("#approve")

    expect(page.locator("#status")).to_have_text("done", timeout=30_000)
    expect(page.locator("#messages li").filter(has_text="assistant: Deleted the project Garden.")).to_have_count(1)
    expect(page.locator("#approval")).to_be_hidden()
    assert not Project.objects.filter(pk=garden.pk).exists()
    assert AgentStep.objects.filter(tool_name="tracker_project_delete", took_effect=True).count() == 1
    assert AgentRun.objects.get().status == "succeeded"
    screenshot(page, "agui-client-resumed")
