"""A profile's admin page shows text that came from outside — a provider's error, a tool's and an intent's
name, the spec's name in the summary line — as text: nothing of it runs in the reviewer's browser."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from registry.models import AgentProfile
from registry.selectors import profile_summary
from registry.services import profile_record_invocation
from tests.review.test_profile_admin import AdminPage

pytestmark = pytest.mark.django_db

MARKUP = '<img src=x onerror="alert(1)">'


def test_text_from_runs_is_escaped_on_the_profile_page_and_in_the_list(user_factory: Any, alice: Any) -> None:
    spec = f"spec{MARKUP}"
    profile_record_invocation(owner=alice, spec_name=spec, entry={
        "run_id": 1, "status": "error", "duration_ms": 10, "tool_calls": 1, "tool_errors": 1, "token_usage": 1,
        "intent": f"intent{MARKUP}", "tools_used": [f"tool{MARKUP}"], "failed_tools": [f"tool{MARKUP}"],
        "error_summary": f"provider said {MARKUP}",
    })
    profile = AgentProfile.objects.get(owner=alice, spec_name=spec)
    client = Client()
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))

    body = client.get(reverse("admin:registry_agentprofile_change", args=[profile.pk])).content.decode()
    assert "<img src=x" not in body
    assert "&lt;img src=x" in body
    page = AdminPage(body)
    assert page.figures["summary"] == profile_summary(owner=alice, spec_name=spec)
    assert page.rows("window")[0][-2] == f"provider said {MARKUP}"  # the error, before the run's cost
    assert page.rows("tool-usage")[0][0] == f"tool{MARKUP}"
    assert page.rows("intents")[0][0] == f"intent{MARKUP}"

    listing = client.get(reverse("admin:registry_agentprofile_changelist")).content.decode()
    assert "<img src=x" not in listing
    assert "&lt;img src=x" in listing  # shown, as text
