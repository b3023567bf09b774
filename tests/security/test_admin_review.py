"""What a model or a person wrote reaches staff in the admin as text: the run's page and the run list never
carry their markup, and the run list runs no lookup a link makes up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep

pytestmark = pytest.mark.django_db

PAYLOAD = '<img src=x onerror="alert(1)">'


def test_markup_in_a_run_and_its_steps_shows_as_text_to_staff(alice: Any, user_factory: Callable[..., Any]
                                                               ) -> None:
    chat = AgentChat.objects.create(owner=alice, title=PAYLOAD)
    run = AgentRun.objects.create(owner=alice, chat=chat, status="failed",
                                  reply=f"Here: {PAYLOAD} [x](javascript:alert(1))", error=PAYLOAD,
                                  stop_reason=PAYLOAD[:40], model=PAYLOAD, quality_score=0.0, feedback_comment=PAYLOAD)
    AgentMessage.objects.create(chat=chat, owner=alice, role="user", content=PAYLOAD, run=run)
    AgentStep.objects.create(run=run, seq=1, kind="tool_call", tool_name=PAYLOAD, arguments={PAYLOAD: PAYLOAD},
                             result={"status": "invalid", "took_effect": False, "reason": PAYLOAD},
                             took_effect=False, reason=PAYLOAD, summary=PAYLOAD, confirmation="denied")
    AgentStep.objects.create(run=run, seq=2, kind="model_call", result={"text": PAYLOAD,
                                                                        "tool_calls": [{"name": PAYLOAD}]})
    staff = Client()
    staff.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))

    for url in (f"/admin/assistant/agentrun/{run.pk}/change/", "/admin/assistant/agentrun/",
                f"/admin/assistant/agentrun/?q={run.error[:5]}"):
        body = staff.get(url).content.decode()
        assert "<img src=x" not in body and 'href="javascript:' not in body, url
        assert "&lt;img src=x" in body, url
