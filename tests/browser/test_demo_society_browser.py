"""The site's demo society as a person sees it, in Chromium, through daphne, the real worker and the channel
layer, with the offline demo model and no key: on the project list, the dock is asked to create a project
with two tasks and then list the open tasks; each member's steps appear nested under the step that asked it
while the request is worked on, the project list behind the panel shows the new project without a reload,
and a reload shows the same tree."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from assistant.models import AgentChat, AgentRun
from tests.browser.harness import BROWSER_MARKS, ask, screenshot, wait_for_replies
from tests.browser.harness import log_in as sign_in
from tests.conftest import WorkerProcess
from tracker.models import Project, Task

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def site_model() -> None:
    """The site as a fresh machine runs it: no model configured, so the offline demo model answers."""
    return None

DOCK = "#assistant-dock"
THREAD = f"{DOCK} [data-assistant-thread]"
MEMBER_SUMMARIES = f"{THREAD} .assistant-member > summary"
GARDEN = "create a project Garden with the tasks 'water the plants' and 'buy seeds', then tell me my open tasks"


def _watch_members(page: Any) -> None:
    """Record which members' blocks the thread showed before the first final reply appeared."""
    page.evaluate(
        """(dock) => {
            const root = document.querySelector(dock);
            window.__before_reply = [];
            new MutationObserver(() => {
                if (root.querySelector(".assistant-message.is-assistant:not(.is-draft)")) return;
                root.querySelectorAll(".assistant-member > summary").forEach((summary) => {
                    const member = summary.textContent.replace(/^Steps of (\\S+):.*$/s, "$1");
                    if (!window.__before_reply.includes(member)) window.__before_reply.push(member);
                });
            }).observe(root, {subtree: true, childList: true, characterData: true});
        }""",
        DOCK,
    )


def test_the_demo_society_works_a_request_through_its_members_in_the_panel(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    AgentChat.objects.create(owner=alice, spec="orchestrator")  # the site's default spec, as a new chat has it
    sign_in(page, site_url, "alice")
    page.goto(site_url + "/tracker/")
    expect(page.locator("main")).not_to_contain_text("Garden")
    page.evaluate("window.__sameDocument = true")
    page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    _watch_members(page)

    ask(page, GARDEN, within=DOCK)

    # Live: every member's block was in the panel, nested, before the answer came.
    seen = page.evaluate("window.__before_reply")
    assert sorted(seen) == ["clerk", "keeper", "reader"], seen
    summaries = page.locator(MEMBER_SUMMARIES)
    expect(summaries).to_have_count(4)
    expect(summaries.nth(0)).to_contain_text("Steps of keeper: answered")
    expect(summaries.nth(3)).to_contain_text("Steps of reader: answered")
    expect(page.locator(f"{THREAD} .assistant-step.is-delegation").first).to_contain_text(
        "keeper answered: Done: Project “Garden” created.")
    reply = page.locator(f"{THREAD} .assistant-message.is-assistant:not(.is-draft) .assistant-message-body").last
    expect(reply).to_contain_text("water the plants")
    expect(reply).to_contain_text("Fix the tap")
    # The project list behind the panel keeps up, in the same document.
    garden = Project.objects.get(owner=alice, name="Garden")
    expect(page.locator(f"main a[href='/tracker/projects/{garden.pk}/']")).to_have_count(1)
    assert page.evaluate("window.__sameDocument === true"), "the project list was reloaded instead of refreshed"
    top = AgentRun.objects.get(owner=alice, parent__isnull=True)
    assert [run.spec for run in AgentRun.objects.filter(root=top).order_by("pk")] == [
        "keeper", "clerk", "clerk", "reader"]
    screenshot(page, "demo-society")

    # A reload shows the same tree: the past run's steps folded, the members nested inside.
    page.reload()
    if not page.locator(f"{DOCK}[open], {DOCK}:not([hidden])").count():
        page.click(".assistant-launcher")
    page.wait_for_selector(f"{DOCK} [data-assistant-status].is-connected")
    wait_for_replies(page, 1, within=DOCK)
    page.click(f"{THREAD} > .assistant-steps > details > summary")
    expect(summaries).to_have_count(4)
    expect(summaries.nth(1)).to_contain_text("Steps of clerk: answered")
