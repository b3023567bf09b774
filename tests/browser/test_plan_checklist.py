"""A run's plan as the person sees it, in Chromium, through daphne, the real worker and the channel layer, with
the offline demo model and no key: a request of several parts is planned first and the plan shows as a checklist
above the run's steps, each step ticked as the member that carries it out answers, each linked to the step
that asked that member; a second tab shows the same as it happens, and a reload shows the same plan. A part
that fails shows as failed with why, and the plan revised (what was dropped, and why). A member's plan shows
inside its nested block: waiting for the person's approval, answered with a change instead, revised, and
after reloads. The checklist passes the accessibility check in light and dark."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from assistant.models import AgentChat, AgentPlan, AgentRun
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from tests.browser.harness import (
    BROWSER_MARKS,
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


@pytest.fixture(scope="module")
def site_model() -> None:
    """The site as a fresh machine runs it: no model configured, so the offline demo model answers."""
    return None


CONV = "[data-assistant-conversation]"
THREAD = f"{CONV} [data-assistant-thread]"
# The top run's plan: in its block, above its steps (a member's plan would sit inside its nested block).
PLAN = f"{THREAD} > .assistant-steps > .assistant-plan"
PLAN_STEPS = f"{PLAN} .assistant-plan-step"
GARDEN = "create a project Garden with the tasks 'water the plants' and 'buy seeds', then tell me my open tasks"
ATTIC = "add the task 'sweep' to the project 'Attic', then tell me my open tasks"
GARDEN_STEPS = [
    ("Create the project 'Garden'.", "keeper"),
    ("Add the task 'water the plants' to the project 'Garden'.", "clerk"),
    ("Add the task 'buy seeds' to the project 'Garden'.", "clerk"),
    ("List my open tasks.", "reader"),
]


def _open(page: Any, site_url: str) -> None:
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")


def _watch_plan(page: Any) -> None:
    """Record, at every change of the thread until the first final reply, the statuses its plan showed."""
    page.evaluate(
        """([thread, steps]) => {
            const root = document.querySelector(thread);
            window.__plan_seen = [];
            new MutationObserver(() => {
                if (root.querySelector(".assistant-message.is-assistant:not(.is-draft)")) return;
                const shown = [...document.querySelectorAll(steps)].map((step) => step.dataset.status).join(",");
                const seen = window.__plan_seen;
                if (shown && seen[seen.length - 1] !== shown) seen.push(shown);
            }).observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
        }""",
        [THREAD, PLAN_STEPS],
    )


def _checklist(page: Any, selector: str = PLAN) -> list[dict[str, Any]]:
    """Each step of the checklist as shown: its number, words, status text, member line, and where each of
    its buttons leads (the step it names: whether it is a delegation step, and its text)."""
    return page.evaluate(
        """(plan) => [...document.querySelectorAll(plan + " .assistant-plan-steps > li")].map((item) => ({
            n: item.value, status: item.dataset.status,
            do: item.querySelector(".assistant-plan-do").textContent,
            said: item.querySelector(".assistant-plan-status").textContent,
            member: (item.querySelector(".assistant-plan-member") || {}).textContent || "",
            links: [...item.querySelectorAll("[data-plan-step-link]")].map((link) => {
                const step = document.querySelector(
                    '.assistant-step[data-step-id="' + link.dataset.planStepLink + '"]');
                return {id: Number(link.dataset.planStepLink), label: link.getAttribute("aria-label"),
                        delegation: !!(step && step.classList.contains("is-delegation")),
                        text: step ? step.querySelector(".assistant-step-text").textContent : null};
            }),
        }))""",
        selector,
    )


def _assert_garden_checklist(page: Any, plan: AgentPlan, selector: str = PLAN) -> None:
    shown = _checklist(page, selector)
    assert [(step["n"], step["do"], step["status"], step["said"]) for step in shown] == [
        (n, words, "done", "done") for n, (words, _member) in enumerate(GARDEN_STEPS, start=1)], shown
    for step, (_words, member), row in zip(shown, GARDEN_STEPS, plan.steps, strict=True):
        assert step["member"].startswith(f"Member: {member}"), step
        # Linked to the step that asked its member: the delegation step the plan's row names.
        assert [link["id"] for link in step["links"]] == row["step_ids"], (step, row)
        assert all(link["delegation"] and member in link["text"] for link in step["links"]), step
        assert step["links"][0]["label"] == f"Show step that carried out plan step {step['n']}"
    expect(page.locator(f"{selector} .assistant-plan-progress")).to_have_text("4 of 4 done")


def test_a_planned_request_shows_its_checklist_ticking_live_in_both_tabs_and_after_a_reload(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    AgentChat.objects.create(owner=alice, spec="orchestrator")  # the site's default spec, as a new chat has it
    log_in(page, site_url, "alice")
    other = page.context.new_page()  # a second tab of the same person, watching
    _open(other, site_url)
    _open(page, site_url)
    _watch_plan(page)

    ask(page, GARDEN, within=CONV)

    # Live: the checklist appeared with four steps to do, and they were ticked before the answer came.
    seen = page.evaluate("window.__plan_seen")
    assert seen[0] == "pending,pending,pending,pending", seen
    assert "done,done,done,done" in seen, seen
    assert len(seen) >= 3, seen  # ticked as it went, not drawn once at the end
    top = AgentRun.objects.get(owner=alice, parent__isnull=True)
    [plan] = AgentPlan.objects.filter(run=top)
    _assert_garden_checklist(page, plan)
    # The planning step reads as a plan made, not as a tool call.
    planning = page.locator(f"{THREAD} .assistant-step.is-plan")
    expect(planning).to_have_count(1)
    expect(planning.locator(".assistant-step-text")).to_have_text("Planned 4 steps")
    assert planning.get_attribute("data-step-id") == str(plan.made_in_id)
    expect(page.locator(f"{THREAD} .assistant-step.is-model").first).to_contain_text("Decided on: make a plan")
    # The last news said politely in the plan's own region: the last step done, and the plan complete.
    expect(page.locator(f"{CONV} [data-assistant-plan-announce]")).to_contain_text("4 of 4 done")

    # The second tab followed the same events: the same checklist.
    wait_for_replies(other, 1, within=CONV)
    _assert_garden_checklist(other, plan)
    other.close()

    # A step's button goes to the step that carried it out: in view, focused.
    page.click(f"{PLAN_STEPS} >> nth=3 >> [data-plan-step-link]")
    asked = page.locator(f"{THREAD} .assistant-step[data-step-id='{plan.steps[3]['step_ids'][0]}']")
    expect(asked.locator(":scope > summary")).to_be_focused()
    expect(asked).to_contain_text("reader answered")
    expect(asked).to_have_attribute("open", "")

    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found = axe_violations(page, PLAN)
        assert not found, f"[{scheme}]\n{describe_violations(found)}"
        screenshot(page.locator(PLAN), f"plan-checklist-{scheme}")
        found = axe_violations(page, CONV)
        assert not found, f"[{scheme}]\n{describe_violations(found)}"
    page.emulate_media(color_scheme="light")

    # A reload: the past run's steps are folded, its plan is in view, every step done, each still linked.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    wait_for_replies(page, 1, within=CONV)
    expect(page.locator(PLAN)).to_be_visible()
    _assert_garden_checklist(page, plan)
    expect(page.locator(f"{THREAD} .assistant-step.is-plan")).to_be_hidden()
    # Its button unfolds the past run's steps to show the step.
    page.click(f"{PLAN_STEPS} >> nth=0 >> [data-plan-step-link]")
    asked = page.locator(f"{THREAD} .assistant-step[data-step-id='{plan.steps[0]['step_ids'][0]}']")
    expect(asked.locator(":scope > summary")).to_be_focused()
    expect(asked).to_contain_text("keeper answered")


def test_a_failed_step_shows_why_and_the_revised_plan_says_what_it_dropped(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess
) -> None:
    AgentChat.objects.create(owner=alice, spec="orchestrator")
    log_in(page, site_url, "alice")
    _open(page, site_url)
    _watch_plan(page)

    ask(page, ATTIC, within=CONV)

    # Live: two steps to do, then the first failed (before the answer).
    seen = page.evaluate("window.__plan_seen")
    assert seen[0] == "pending,pending", seen
    assert any(statuses.startswith("failed") for statuses in seen), seen
    top = AgentRun.objects.get(owner=alice, parent__isnull=True)
    first, revised = AgentPlan.objects.filter(run=top).order_by("revision")
    why = revised.steps[0]["why"]
    assert why and revised.reason

    def assert_revised() -> None:
        expect(page.locator(f"{PLAN} .assistant-plan-revised")).to_have_text(
            f"Plan revised (revision 2): {revised.reason}")
        expect(page.locator(f"{PLAN} .assistant-plan-changes")).to_have_text(
            "Dropped: List my open tasks.")
        [step] = _checklist(page)
        assert (step["n"], step["status"], step["said"]) == (1, "failed", f"failed: {why}"), step
        assert step["member"].startswith("Member: clerk") and step["links"][0]["delegation"], step
        expect(page.locator(f"{PLAN} .assistant-plan-progress")).to_have_text("0 of 1 done, 1 failed")

    assert_revised()
    planning = page.locator(f"{THREAD} .assistant-step.is-plan .assistant-step-text")
    expect(planning).to_have_text(["Planned 2 steps", "Revised the plan (revision 2)"])
    expect(page.locator(f"{CONV} [data-assistant-plan-announce]")).to_contain_text("Plan revised (revision 2)")
    screenshot(page.locator(PLAN), "plan-revised")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found = axe_violations(page, PLAN)
        assert not found, f"[{scheme}]\n{describe_violations(found)}"
    page.emulate_media(color_scheme="light")

    # A reload shows the same, what was dropped included (read from the planning steps' results).
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    wait_for_replies(page, 1, within=CONV)
    assert_revised()


def test_a_members_plan_waits_for_approval_in_its_nested_block_and_a_comment_revises_it(
    page: Any, site_url: str, alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    """The test settings' society (tests/settings.py): a chat under `test-asker`, which asks `test-clerk`. The
    clerk's plan has a destructive step, so it waits for the person (plan approval, when_destructive); the
    person asks for a change instead, and the clerk's revision is followed."""
    home = Project.objects.create(owner=alice, name="Home")
    chore = Task.objects.create(project=home, title="Old chore")
    AgentChat.objects.create(owner=alice, spec="test-asker")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "Delete the old chore, then list my tasks."})]),
        openai_stream([], [("p1", "assistant_plan", {"steps": [
            {"do": "Delete the task 'Old chore'", "tool": "tracker_task_delete"},
            {"do": "List your tasks", "tool": "tracker_task_list"}]})]),
        openai_stream([], [("p2", "assistant_plan", {
            "steps": [{"do": "List your tasks", "tool": "tracker_task_list"}],
            "reason": "You asked to keep the old chore."})]),
        openai_stream([], [("k1", "tracker_task_list", {})]),
        openai_stream(["Kept it; here are your tasks."]),
        openai_stream(["The clerk kept the old chore."]),
    )
    member_plan = f"{THREAD} .assistant-member > .assistant-plan"
    card = page.locator(f"{THREAD} .assistant-member .assistant-confirm")
    log_in(page, site_url, "alice")
    _open(page, site_url)
    page.fill(f"{CONV} [data-assistant-input]", "delete the old chore and list my tasks")
    page.press(f"{CONV} [data-assistant-input]", "Enter")

    def assert_waiting() -> None:
        # The plan waits on its own planning step's card, in words, one step a line.
        expect(card).to_be_visible()
        expect(card).to_contain_text("test-clerk asks: Plan:\n1. Delete the task 'Old chore' — destructive: "
                                     "asks you again before it runs\n2. List your tasks")
        expect(page.locator(f"{THREAD} .assistant-member .assistant-step.is-plan .assistant-step-text")).to_have_text(
            "Waiting for your approval of the plan")
        # Its checklist sits in the member's block (the run that asked it has none), nothing of it done yet.
        expect(page.locator(member_plan)).to_have_attribute("aria-label", "Plan of test-clerk")
        expect(page.locator(f"{member_plan} .assistant-plan-approval")).to_have_text("Waiting for your approval.")
        shown = _checklist(page, member_plan)
        assert [(step["do"], step["said"], step["links"]) for step in shown] == [
            ("Delete the task 'Old chore'", "to do", []), ("List your tasks", "to do", [])], shown
        expect(page.locator(PLAN)).to_have_count(0)

    assert_waiting()
    screenshot(page.locator(f"{THREAD} .assistant-member"), "plan-member-waiting")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        found = axe_violations(page, CONV)
        assert not found, f"[{scheme}]\n{describe_violations(found)}"
    page.emulate_media(color_scheme="light")

    # A reload while it waits: the same, from the load's members[].plan.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    assert_waiting()

    # Answered with a change instead of Approve or Deny, by keyboard.
    card.locator(".assistant-confirm-comment > summary").click()
    expect(card.locator("[data-plan-comment]")).to_be_focused()
    page.keyboard.type("Keep the old chore.")
    card.locator("button:has-text('Send changes')").click()
    wait_for_replies(page, 1, within=CONV)

    clerk = AgentRun.objects.get(spec="test-clerk")
    first, revised = AgentPlan.objects.filter(run=clerk).order_by("revision")
    assert (first.approval, first.comment) == ("commented", "Keep the old chore.")
    assert Task.objects.filter(pk=chore.pk).exists()

    def assert_revised() -> None:
        expect(page.locator(f"{member_plan} .assistant-plan-revised")).to_have_text(
            "Plan revised (revision 2): You asked to keep the old chore.")
        expect(page.locator(f"{member_plan} .assistant-plan-changes")).to_have_text(
            "Dropped: Delete the task 'Old chore'")
        shown = _checklist(page, member_plan)
        assert [(step["do"], step["said"], [link["id"] for link in step["links"]]) for step in shown] == [
            ("List your tasks", "done", revised.steps[0]["step_ids"])], shown
        planning = page.locator(f"{THREAD} .assistant-member .assistant-step.is-plan .assistant-step-text")
        expect(planning).to_have_text(
            ["You asked for changes to the plan: Keep the old chore.", "Revised the plan (revision 2)"])

    expect(page.locator(f"{member_plan} .assistant-plan-progress")).to_have_text("1 of 1 done")
    assert_revised()
    screenshot(page.locator(f"{THREAD} .assistant-member"), "plan-member-revised")

    # Once all is done, a reload draws the past member's plan inside its folded block, what it dropped included.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    wait_for_replies(page, 1, within=CONV)
    expect(page.locator(member_plan)).to_be_hidden()
    page.click(f"{THREAD} > .assistant-steps > details > summary")
    page.click(f"{THREAD} .assistant-member > summary")
    assert_revised()
    page.click(f"{member_plan} [data-plan-step-link]")
    listed_id = revised.steps[0]["step_ids"][0]
    listed = page.locator(f"{THREAD} .assistant-member .assistant-step[data-step-id='{listed_id}']")
    expect(listed.locator(":scope > summary")).to_be_focused()
