"""The site shell a person sees: login, the dock on every page, the assistant page, admin for staff
(/healthz is in tests/security/test_healthz.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def test_pages_need_a_login() -> None:
    for url in ["/", "/assistant/"]:
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")


def test_logging_in_with_the_form_lands_on_home_with_the_dock(alice: Any) -> None:
    client = Client()
    response = client.post("/login/", {"username": "alice", "password": "pw"}, follow=True)
    page = response.content.decode()
    assert response.status_code == 200
    assert "Welcome, alice" in page
    assert 'class="assistant-launcher"' in page
    assert 'id="assistant-dock"' in page
    assert "/static/vendor/htmx-2.0.11.min.js" in page


def test_wrong_password_is_refused_with_a_message(alice: Any) -> None:
    response = Client().post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()


def test_assistant_page_is_in_the_same_shell_without_a_second_dock(auth_client: Client) -> None:
    page = auth_client.get("/assistant/").content.decode()
    assert 'class="site-header"' in page
    assert "data-assistant-conversation" in page
    assert 'id="assistant-dock"' not in page


def test_demo_model_is_labelled(auth_client: Client) -> None:
    with override_settings(ASSISTANT={"MODEL": "offline"}):
        assert "Demo model" in auth_client.get("/").content.decode()
    with override_settings(ASSISTANT={"MODEL": "openai:gpt-4o-mini"}):
        assert "Demo model" not in auth_client.get("/").content.decode()


def test_admin_is_for_staff_only(auth_client: Client, user_factory: Any) -> None:
    assert auth_client.get("/admin/").status_code == 302  # ordinary user: sent to the admin login
    staff = user_factory("staffer", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    page = client.get("/admin/")
    assert page.status_code == 200
    assert "Agent runs" in page.content.decode()


def test_vendored_static_files_are_served() -> None:
    response = Client().get("/static/vendor/htmx-2.0.11.min.js")
    assert response.status_code == 200


def test_staff_review_a_run_with_its_steps_read_only(user_factory: Any, alice: Any) -> None:
    from assistant.models import AgentChat, AgentRun, AgentStep

    chat = AgentChat.objects.create(owner=alice)
    run = AgentRun.objects.create(owner=alice, chat=chat, status="failed", error="limit", stop_reason="max_tool_calls")
    AgentStep.objects.create(run=run, seq=1, kind="tool_call", tool_name="tracker_task_create",
                             arguments={"title": "x"}, took_effect=False, reason="the form has errors")
    staff = user_factory("reviewer", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    listing = client.get("/admin/assistant/agentrun/?status=failed").content.decode()  # the sidebar's own filter
    assert f">{run.pk}<" in listing
    page = client.get(f"/admin/assistant/agentrun/{run.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "tracker_task_create" in body and "the form has errors" in body
    assert 'name="_save"' not in body  # records are evidence: nothing to edit
