"""Approve with changes, as the person does it, in Chromium, through daphne, the real worker and the channel layer,
the model scripted to misspell a task's new title: the card's "Change values" opens a form prefilled with what the
model asked for; a title too long for the task is refused with the problem beside its field and nothing runs; the
corrected title is approved and is what the task is called. The card with its form open passes the accessibility
check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from assistant.models import AgentStep
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
CARD = f"{CONV} .assistant-confirm"


def test_the_person_corrects_a_value_on_the_card_and_what_runs_is_their_value(
    page: Any, site_url: str, alice: Any, model_script: Callable[..., None], celery_worker: WorkerProcess,
) -> None:
    task = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    model_script({"tool_calls": [{"name": "test_task_change",
                                  "arguments": {"pk": task.pk, "title": "Buy mlk", "status": "todo"}}]},
                 {"text": "Renamed the task."})
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    page.fill(f"{CONV} [data-assistant-input]", "Rename the tap task to Buy milk")
    page.press(f"{CONV} [data-assistant-input]", "Enter")

    card = page.locator(CARD)
    expect(card).to_be_visible()
    card.locator(".assistant-confirm-edit > summary").click()
    expect(card.get_by_role("combobox", name="status")).to_have_value("todo")
    # Drawn again from the server's rows, the form knows the tool's fields as well.
    page.reload()
    page.wait_for_selector(f"{CONV} [data-assistant-status].is-connected")
    expect(card).to_be_visible()
    card.locator(".assistant-confirm-edit > summary").click()
    title = card.get_by_label("title")
    expect(title).to_have_value("Buy mlk")
    # The first value (the task's id, as the model gave it) takes the focus once the form opens.
    page.wait_for_function("document.activeElement && document.activeElement.name === 'pk'")
    expect(card.get_by_label("pk")).to_have_value(str(task.pk))
    # From the tool's own form: a choice is a list of its values, and each field says what it is.
    status = card.get_by_role("combobox", name="status")
    expect(status).to_have_value("todo")
    assert status.locator("option").all_inner_texts() == ["todo", "doing", "done"]
    expect(card.locator(".assistant-confirm-field-hint").first).to_be_visible()

    # Too long for a task's title: refused beside the field, nothing ran, the card still waits.
    title.fill("x" * 201)
    card.locator("[data-confirm='approve-changed']").click()
    problem = card.locator("[data-field-problem='title']")
    expect(problem).to_contain_text("too long")
    expect(title).to_have_attribute("aria-invalid", "true")
    expect(card.locator("[data-confirm='approve-changed']")).to_be_enabled()
    # Said on the card, where it can be mended; not again under the message box.
    expect(page.locator(f"{CONV} [data-assistant-status]")).not_to_contain_text("do not fit")
    assert Task.objects.get(pk=task.pk).title == "Fix the tap"
    violations = axe_violations(page, CARD)
    assert not violations, describe_violations(violations)
    screenshot(card, "approve-with-changes-refused")

    title.fill("Buy milk")
    status.select_option("doing")
    card.locator("[data-confirm='approve-changed']").click()
    wait_for_replies(page, 1, within=CONV)
    expect(page.locator(f"{CONV} .assistant-message.is-assistant").last).to_contain_text("Renamed the task.")
    assert Task.objects.filter(pk=task.pk).values_list("title", "status").get() == ("Buy milk", "doing")
    step = AgentStep.objects.get(tool_name="test_task_change")
    assert (step.arguments, step.asked_arguments, step.confirmation) == (
        {"pk": task.pk, "title": "Buy milk", "status": "doing"},
        {"pk": task.pk, "title": "Buy mlk", "status": "todo"}, "approved")
