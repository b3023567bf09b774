"""What the AG-UI sub-app checks at start-up (assistant.E050), and what its endpoint answers when the protocol's
package is missing: the site starts, says what to install, and the endpoint answers 503 in words."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client, override_settings

from assistant.agui.checks import check_agui, check_agui_urls


def test_the_site_passes_the_check_with_the_package_installed() -> None:
    assert check_agui(None) == []


def test_the_site_routes_the_endpoint_with_the_assistants_own_urls() -> None:
    assert check_agui_urls(None) == []


@override_settings(ROOT_URLCONF="tests.testapp.assistant_urls_only")
def test_an_include_of_the_assistants_urls_alone_is_told_to_include_the_endpoint_too() -> None:
    # The host includes the sub-apps' URLs (assistant/urls.py, `assistant_urls`): a URLconf written before, with the
    # assistant's own include alone, routes no endpoint, and `manage.py check` says how to route it.
    [warning] = check_agui_urls(None)

    assert warning.id == "assistant.W051" and "assistant:ag-ui" in warning.msg
    assert 'include(assistant_urls("assistant.agui.urls"))' in warning.hint


@override_settings(ROOT_URLCONF=__name__)
def test_a_urlconf_without_the_assistant_at_all_is_not_the_endpoints_to_judge() -> None:
    assert check_agui_urls(None) == []


urlpatterns: list[Any] = []


def test_a_missing_package_is_an_error_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ag_ui.core", None)  # as if it were not installed: importing it fails

    [error] = check_agui(None)

    assert error.id == "assistant.E050" and "not installed" in error.msg
    assert "/path/to/this/checkout[ag-ui]" in error.hint and "ag-ui-protocol" in error.hint


def test_a_version_without_interrupts_or_subagents_is_an_error_naming_what_it_lacks(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    import ag_ui.core as real

    old = types.ModuleType("ag_ui.core")
    for name in ("RunAgentInput", "RunFinishedEvent", "PROTOCOL_VERSION"):
        setattr(old, name, getattr(real, name))
    monkeypatch.setitem(sys.modules, "ag_ui.core", old)
    monkeypatch.setattr(sys.modules["ag_ui"], "core", old)

    [error] = check_agui(None)

    assert error.id == "assistant.E050"
    assert "RunFinishedInterruptOutcome" in error.msg and "SubagentStartedEvent" in error.msg and "1.0" in error.msg


@pytest.mark.django_db
def test_without_the_package_the_endpoint_answers_503_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch, alice: Any
) -> None:
    monkeypatch.setitem(sys.modules, "ag_ui.core", None)
    client = Client()
    client.force_login(alice)

    answer = client.post("/assistant/ag-ui/", data="{}", content_type="application/json")

    assert answer.status_code == 503
    assert answer.json()["error"] == "unavailable" and "ag-ui-protocol" in answer.json()["message"]


def test_manage_py_check_reports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ag_ui.core", None)

    with pytest.raises(SystemCheckError) as failed:
        call_command("check")

    assert "assistant.E050" in str(failed.value)
