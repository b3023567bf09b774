"""The MCP sub-app's start-up checks: a host whose OAuth set-up would let nobody consent is told at once."""

from __future__ import annotations

from django.core.checks import run_checks
from django.test import override_settings


def _ids() -> set[str]:
    return {message.id for message in run_checks() if message.id and message.id.startswith("assistant.")}


def test_the_sites_own_oauth_set_up_passes() -> None:
    assert not _ids() & {"assistant.E040", "assistant.E041", "assistant.W040"}


@override_settings(ROOT_URLCONF="tests.testapp.oauth_plain_urls")
def test_oauth_routed_to_the_librarys_own_consent_is_an_error() -> None:
    assert "assistant.E041" in _ids()
