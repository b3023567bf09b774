"""Answers that link and show the app's own things.

A reply links an object it names to the object's page only when its person can open it: through the real socket,
worker and database, the model is handed each task's page by the read and writes links, one of them to a task of
someone else's and one to no page at all; only the person's own task and the site's page stay links, live and after
a reload. A tool that declares a card draws the object its step acted on with the app's own template, as its
person may read it: the card comes with the step's event and its reload, and a template that reaches for anything
the person's read does not give (another person's e-mail, a password, a field not declared) shows nothing of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from assistant.live.cards import step_card
from assistant.models import AgentMessage, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until
from assistant.tools.outcome import ToolOutcome
from tests.conftest import WorkerProcess, assistant_settings_with
from tracker.models import Project, Task

FINAL = {"assistant.replied", "assistant.reply_failed"}


def _ask(user: Any, text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The events of one message, to its reply; then those of the chat loaded again, as after a reload."""
    tab = connect(user)

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": text})
        events = await receive_until(tab, lambda e: e["type"] in FINAL, timeout=30)
        chat_id = events[-1]["chat_id"]
        await tab.send_json_to({"type": "assistant.load", "chat_id": chat_id, "steps": True})
        loaded = await receive_until(tab, lambda e: e["type"] == "assistant.messages_loaded", timeout=30)
        await tab.disconnect()
        return events, loaded

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        return asyncio.run(scenario())


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_reply_links_only_the_pages_its_person_can_open(
    alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    mine = Task.objects.create(project=home, title="Buy milk")
    theirs = Task.objects.create(project=Project.objects.create(owner=bob, name="Website"), title="Bob's plan")
    fake_openai.queue(
        openai_stream([], [("c1", "tracker_task_list", {})]),
        openai_stream([f"[Buy milk](/tracker/tasks/{mine.pk}/) is open. [Bob's plan](/tracker/tasks/{theirs.pk}/) "
                       "is not yours; see [your projects](/tracker/) or [this](/no/such/page/)."]),
    )

    events, loaded = _ask(alice, "what are my open tasks?")

    # The read handed the model each task's page to link with.
    [read] = AgentStep.objects.filter(tool_name="tracker_task_list")
    [row] = read.result["data"]["results"]
    assert (row["title"], row["url"]) == ("Buy milk", f"/tracker/tasks/{mine.pk}/")
    replied = events[-1]
    assert replied["type"] == "assistant.replied"
    [reply] = [m for m in loaded[-1]["messages"] if m["role"] == "assistant"]
    for html in (replied["message"]["html"], reply["html"]):
        # Alice's task and the tracker's page stay links.
        assert f'<a href="/tracker/tasks/{mine.pk}/" rel="noopener noreferrer nofollow">Buy milk</a>' in html
        assert '<a href="/tracker/" rel="noopener noreferrer nofollow">your projects</a>' in html
        # Bob's task is named, not linked; an address that is no page of the site is not linked either.
        assert f"/tracker/tasks/{theirs.pk}/" not in html and "Bob's plan is not yours" in html
        assert "/no/such/page/" not in html and "this</a>" not in html
    # The reply itself is kept as the model wrote it; what it may link to is kept beside it.
    message = AgentMessage.objects.get(pk=replied["message"]["id"])
    assert f"(/tracker/tasks/{theirs.pk}/)" in message.content
    assert message.links == [f"/tracker/tasks/{mine.pk}/", "/tracker/"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_step_shows_the_tools_card_of_what_it_did_live_after_a_reload_and_to_staff(
    alice: Any, user_factory: Callable[..., Any], celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    fake_openai.queue(
        openai_stream([], [("c1", "tracker_task_create", {"project": home.pk, "title": "Fix <the> fence",
                                                           "priority": 3, "due_date": "2026-12-24"})]),
        openai_stream(["Added it."]),
    )

    events, loaded = _ask(alice, "add 'Fix <the> fence' to Home, high priority, due Christmas Eve")

    task = Task.objects.get(title="Fix <the> fence")
    finished = [e["step"] for e in events if e["type"] == "assistant.step" and e["step"]["state"] == "finished"
                and e["step"]["tool_name"] == "tracker_task_create"]
    [reloaded] = [step for run in loaded[-1]["runs"] for step in run["steps"]
                  if step["tool_name"] == "tracker_task_create"]
    for card in (finished[-1]["card"], reloaded["card"]):
        # The tracker's own template, as alice reads the task: its title escaped, linked to its page; the
        # labels of its choices; its project by name; its due date.
        assert (f'<a href="/tracker/tasks/{task.pk}/" rel="noopener noreferrer nofollow">Fix &lt;the&gt; fence</a>'
                in card)
        assert "<dd>To do</dd>" in card and "<dd>High</dd>" in card and "<dd>Home</dd>" in card
        assert '<time datetime="2026-12-24">2026-12-24</time>' in card
    # The model reads the outcome, not the card.
    step = AgentStep.objects.get(tool_name="tracker_task_create")
    assert "card" not in str(step.result)
    # Staff's timeline of the run shows the card the person was shown.
    staff = Client()
    staff.force_login(user_factory("staff", is_staff=True, is_superuser=True))
    page = staff.get(reverse("admin:assistant_agentrun_change", args=[step.run_id])).content.decode()
    assert 'aria-label="The card the person was shown"' in page and step.card in page


PRYING_CARD = (
    "<p>{{ task.title }}|{{ task.get_status_display }}|{{ task.project.name }}</p>"
    "<p>{{ task.project.owner.email }}|{{ task.created_by.password }}|{{ task.description }}|"
    "{{ task.project.members.all }}|{{ object.comments.all }}</p>"
    "<script>alert(1)</script><img src=x onerror=alert(2)><form><button>Delete</button></form>"
    '<a href="javascript:alert(3)">x</a><a href="//elsewhere.example/">y</a><a href="/tracker/">z</a>'
)
TEMPLATES_WITH_PRYING_CARD = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "OPTIONS": {"loaders": [("django.template.loaders.locmem.Loader", {"tracker/task_card.html": PRYING_CARD}),
                            "django.template.loaders.app_directories.Loader"]},
}]


@pytest.mark.django_db
def test_a_card_template_shows_nothing_its_person_may_not_read(alice: Any, bob: Any) -> None:
    bob.email = "bob@example.com"
    bob.save()
    website = Project.objects.create(owner=bob, name="Website")
    website.members.add(alice)
    shared = Task.objects.create(project=website, title="Launch", description="Only on the page", created_by=bob)
    elsewhere = Task.objects.create(project=Project.objects.create(owner=bob, name="Private"), title="Hidden")

    def card_of(task: Task) -> str:
        outcome = ToolOutcome("tracker_task_update", "done", took_effect=True,
                              data={"redirect": f"/tracker/tasks/{task.pk}/"}, called=f"/tracker/tasks/{task.pk}/edit/")
        return step_card(alice, "tracker_task_update", outcome)

    with override_settings(TEMPLATES=TEMPLATES_WITH_PRYING_CARD):
        card = card_of(shared)
        hidden = card_of(elsewhere)
    # What the tracker's task read gives alice is there; nothing else is, not even what the page would show her.
    assert "<p>Launch|To do|Website</p>" in card
    assert "<p>||||</p>" in card
    assert "bob@example.com" not in card and bob.password not in card and "Only on the page" not in card
    # Sanitised: no script, picture, form or button; links only to this site or the web.
    for absent in ("<script", "alert", "<img", "<form", "<button", "javascript:", "elsewhere.example"):
        assert absent not in card
    assert '<a href="/tracker/" rel="noopener noreferrer nofollow">z</a>' in card
    # A task alice cannot read has no card at all.
    assert hidden == ""
    # Nor has a call that did nothing.
    nothing = ToolOutcome("tracker_task_update", "invalid", called=f"/tracker/tasks/{shared.pk}/edit/")
    assert step_card(alice, "tracker_task_update", nothing) == ""
