"""The panel passes axe-core's WCAG 2 A/AA rules, with nothing serious or critical, in light and dark: the
dock on the site's home page and the /assistant/ page, each holding a conversation (a step, a reply) and
then an approval card."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.harness import BROWSER_MARKS, ask, axe_violations, describe_violations, log_in
from tests.conftest import WorkerProcess
from tracker.models import Project, Task

pytestmark = BROWSER_MARKS

SCHEMES = ("light", "dark")


def test_the_check_reports_what_a_screen_reader_user_would_trip_over(page: Any) -> None:
    """The harness itself: an unlabelled button, an image without text and faint text are found."""
    page.set_content(
        '<main><button id="mute"><span></span></button>'
        '<img id="chart" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">'
        '<p id="faint" style="color:#ddd;background:#fff">barely there</p></main>'
    )
    found = {violation["id"]: violation for violation in axe_violations(page, "main")}
    assert {"button-name", "image-alt", "color-contrast"} <= set(found), describe_violations(found.values())
    assert found["button-name"]["nodes"][0]["target"] == "#mute"
    # Minor findings are left out unless asked for.
    assert all(violation["impact"] in {"serious", "critical"} for violation in found.values())


def _a_conversation_and_a_question(page: Any, model_script: Callable[..., None], home: Project,
                                   within: str) -> None:
    """A step and a Markdown reply, then a deletion waiting for approval."""
    model_script(
        {"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]},
        {"text": "You have **one** project:\n\n- Home, with `1` open task\n\n[Open it](/tracker/)"},
    )
    ask(page, "what projects do I have?", within=within)
    model_script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                 {"text": "Deleted."})
    page.fill(f"{within} [data-assistant-input]", "delete the project Home")
    page.press(f"{within} [data-assistant-input]", "Enter")
    page.wait_for_selector(f"{within} .assistant-confirm")


def _violations_in_both_schemes(page: Any, selector: str) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        found[scheme] = axe_violations(page, selector)
    return found


def _report(found: dict[str, list[dict[str, Any]]]) -> str:
    return "\n".join(f"[{scheme}]\n{describe_violations(violations)}" for scheme, violations in found.items()
                     if violations)


@pytest.fixture
def home(alice: Any) -> Project:
    project = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=project, title="Fix the tap")
    return project


def test_the_open_dock_has_no_serious_violations_in_light_or_dark(
    page: Any, site_url: str, home: Project, model_script: Callable[..., None], celery_worker: WorkerProcess
) -> None:
    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock [data-assistant-status].is-connected")
    _a_conversation_and_a_question(page, model_script, home, within="#assistant-dock")

    found = _violations_in_both_schemes(page, "#assistant-dock")
    assert not any(found.values()), _report(found)
    page.click("#assistant-dock .assistant-confirm button:has-text('Deny')")  # leave no run waiting


def test_the_assistant_page_has_no_serious_violations_in_light_or_dark(
    page: Any, site_url: str, home: Project, model_script: Callable[..., None], celery_worker: WorkerProcess
) -> None:
    log_in(page, site_url, "alice")
    page.goto(site_url + "/assistant/")
    page.wait_for_selector("[data-assistant-status].is-connected")
    _a_conversation_and_a_question(page, model_script, home, within="[data-assistant-conversation]")

    found = _violations_in_both_schemes(page, "body")
    assert not any(found.values()), _report(found)
    page.click(".assistant-confirm button:has-text('Deny')")
