"""The MCP sub-app's start-up checks: a host whose OAuth set-up would let nobody consent is told at once."""

from __future__ import annotations

from django.core.checks import run_checks
from django.test import override_settings


def _ids() -> set[str]:
    return {message.id for message in run_checks() if message.id and message.id.startswith("assistant.")}


def test_the_sites_own_oauth_set_up_passes() -> None:
    assert not _ids() & {"assistant.E040", "assistant.E041", "assistant.W040", "assistant.W041"}


@override_settings(ROOT_URLCONF="tests.testapp.assistant_urls_only")
def test_an_include_of_the_assistants_urls_alone_is_told_to_include_the_apps_too() -> None:
    # The host includes the sub-apps' URLs (assistant/urls.py, `assistant_urls`): a URLconf written before, with the
    # assistant's own include alone, routes neither the endpoint nor the tokens' pages, and `manage.py check` says
    # how to route them.
    [warning] = [message for message in run_checks() if message.id == "assistant.W041"]
    assert "assistant:mcp" in warning.msg and "404" in warning.msg
    assert 'include(assistant_urls("assistant.mcp.urls"))' in (warning.hint or "")


@override_settings(ROOT_URLCONF="tests.testapp.oauth_plain_urls")
def test_oauth_routed_to_the_librarys_own_consent_is_an_error() -> None:
    assert "assistant.E041" in _ids()
