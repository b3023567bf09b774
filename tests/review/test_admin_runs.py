"""Staff reviewing runs through the real admin: a run as a timeline, the run list's filters and search,
the CSV of the filtered list, and evidence nobody can change or delete from the admin."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentRun, AgentStep
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tracker.models import Project

pytestmark = pytest.mark.django_db

RUNS = "/admin/assistant/agentrun/"
EVIDENCE_MODELS = ("agentrun", "agentstep", "agentmessage", "agentmemory", "agentchat")


@pytest.fixture
def superuser_client(user_factory: Callable[..., Any]) -> Client:
    client = Client()
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def viewer_client(user_factory: Callable[..., Any]) -> Client:
    """Staff with only the view permission on the assistant's records."""
    viewer = user_factory("viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(
        content_type__app_label="assistant", codename__in=[f"view_{name}" for name in EVIDENCE_MODELS]))
    client = Client()
    client.force_login(viewer)
    return client


@pytest.fixture
def all_perms_client(user_factory: Callable[..., Any]) -> Client:
    """Staff (not superuser) granted every add/change/delete/view permission on the assistant's records."""
    staffer = user_factory("editor", is_staff=True)
    staffer.user_permissions.set(Permission.objects.filter(content_type__app_label="assistant"))
    client = Client()
    client.force_login(staffer)
    return client


def a_run(owner: Any, question: str = "question", *, created_ago: timedelta | None = None, **fields: Any
          ) -> AgentRun:
    """A run in a chat of its own, with the person's message (and the reply, when it has one)."""
    chat = AgentChat.objects.create(owner=owner, title=question[:40])
    fields.setdefault("status", AgentRun.Status.SUCCEEDED)
    run = AgentRun.objects.create(owner=owner, chat=chat, **fields)
    AgentMessage.objects.create(chat=chat, owner=owner, role="user", content=question, run=run)
    if run.reply:
        AgentMessage.objects.create(chat=chat, owner=owner, role="assistant", content=run.reply, run=run)
    if created_ago is not None:
        AgentRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - created_ago)
        run.refresh_from_db()
    return run


def listed(client: Client, query: str = "") -> list[int]:
    response = client.get(RUNS + query)
    assert response.status_code == 200, (query, response.status_code)
    return [run.pk for run in response.context["cl"].result_list]


def step(run: AgentRun, seq: int, kind: str, *, at_ms: int, **fields: Any) -> AgentStep:
    made = AgentStep.objects.create(run=run, seq=seq, kind=kind, **fields)
    AgentStep.objects.filter(pk=made.pk).update(created_at=run.started_at + timedelta(milliseconds=at_ms))
    return made


def timeline_rows(body: str) -> dict[str, str]:
    """Each step row of the timeline by its sequence number: its HTML."""
    rows = re.findall(r'<tr class="timeline-step[^"]*" id="step-(\d+)"(.*?)</tr>', body, flags=re.S)
    return dict(rows)


def test_a_runs_page_is_a_timeline_with_a_distinct_mark_for_each_outcome(
    superuser_client: Client, alice: Any
) -> None:
    started = timezone.now() - timedelta(seconds=10)
    run = a_run(alice, "Tidy up my projects", reply="I **renamed** one project.", model="openai:gpt-4o-mini",
                started_at=started, finished_at=started + timedelta(seconds=5.5), duration_ms=5500,
                prompt_tokens=300, completion_tokens=40, total_tokens=340, model_calls=2, tool_calls=5,
                tool_errors=2, quality_score=0.0, feedback_comment="It missed one", stop_reason="")
    step(run, 1, "model_call", at_ms=1000, duration_ms=1000, prompt_tokens=200, completion_tokens=30,
         result={"text": "", "tool_calls": [{"name": "tracker_project_list"}]})
    step(run, 2, "tool_call", at_ms=1000, duration_ms=200, tool_name="tracker_project_list",
         arguments={"search": "home"}, result={"status": "data", "took_effect": False, "data": {"results": []}},
         took_effect=False)
    step(run, 3, "tool_call", at_ms=1300, duration_ms=400, tool_name="tracker_project_update",
         arguments={"pk": 3, "name": "House"}, result={"status": "done", "took_effect": True}, took_effect=True)
    step(run, 4, "tool_call", at_ms=1800, duration_ms=100, tool_name="tracker_task_create",
         arguments={"title": ""}, result={"status": "invalid", "took_effect": False,
                                          "reason": "the form has errors"},
         took_effect=False, reason="the form has errors")
    step(run, 5, "tool_call", at_ms=2000, duration_ms=50, tool_name="tracker_task_delete",
         arguments={"pk": 9}, result={"status": "error", "took_effect": False, "reason": "the view answered 500"},
         took_effect=False, reason="the view answered 500", confirmation="approved",
         summary="Delete the task “Old”")
    step(run, 6, "tool_call", at_ms=2100, duration_ms=None, tool_name="test_record_effect",
         arguments={"label": "x"}, result={"status": "unknown", "took_effect": None,
                                           "reason": "the worker stopped during this call"},
         took_effect=None)
    step(run, 7, "model_call", at_ms=4000, duration_ms=1500, prompt_tokens=100, completion_tokens=10,
         result={"text": "I renamed one project.", "tool_calls": []})
    other = a_run(alice, "What is due today?", created_ago=timedelta(hours=1))

    body = superuser_client.get(f"{RUNS}{run.pk}/change/").content.decode()

    rows = timeline_rows(body)
    assert list(rows) == ["1", "2", "3", "4", "5", "6", "7"]
    assert 'data-effect="read"' in rows["2"] and ">read<" in rows["2"] and "tracker_project_list" in rows["2"]
    assert 'data-effect="done"' in rows["3"] and ">done<" in rows["3"] and "&quot;House&quot;" in rows["3"]
    assert 'data-effect="no-effect"' in rows["4"] and ">no effect<" in rows["4"]
    assert "the form has errors" in rows["4"]
    assert 'data-effect="failed"' in rows["5"] and ">failed<" in rows["5"] and "the view answered 500" in rows["5"]
    assert "approved" in rows["5"] and "Delete the task “Old”" in rows["5"]
    assert 'data-effect="unknown"' in rows["6"]
    # Each mark is its own: no two outcomes share a symbol.
    marks = {seq: re.search(r'class="effect-mark"[^>]*>([^<]+)<', rows[seq]).group(1) for seq in "23456"}
    assert len(set(marks.values())) == 5, marks
    # Tokens per model call, and bars on one time axis from the run's start: the last model call's row was
    # written when it answered, so its bar starts 1.5 s before (at 2.5 s of a 5.5 s span, ~45%).
    assert "200 → 30" in rows["1"]
    bar = re.search(r'class="timeline-bar" style="--start: ([\d.]+)%; --width: ([\d.]+)%', rows["7"])
    assert bar is not None and 44 <= float(bar.group(1)) <= 47 and 26 <= float(bar.group(2)) <= 29, rows["7"]
    first = re.search(r'class="timeline-bar" style="--start: ([\d.]+)%', rows["1"])
    assert first is not None and float(first.group(1)) == 0.0
    # On top: the reply rendered, the question, outcome, owner, chat, model, tokens, feedback.
    summary = body.split('id="run-timeline"')[0]
    assert "<strong>renamed</strong>" in summary and "Tidy up my projects" in summary
    assert "openai:gpt-4o-mini" in summary and "alice" in summary and "340" in summary
    assert "It missed one" in summary and "pending" not in summary
    assert reverse("admin:assistant_agentchat_change", args=[run.chat_id]) in summary
    # The owner's other recent runs, linked.
    assert reverse("admin:assistant_agentrun_change", args=[other.pk]) in body and "What is due today?" in body


def test_an_active_runs_counts_are_counted_from_its_steps_and_marked_pending(
    viewer_client: Client, alice: Any
) -> None:
    run = a_run(alice, "Delete Home", status=AgentRun.Status.AWAITING_CONFIRMATION,
                started_at=timezone.now() - timedelta(seconds=3))
    step(run, 1, "model_call", at_ms=0, duration_ms=500, prompt_tokens=120, completion_tokens=8,
         result={"text": "", "tool_calls": [{"name": "tracker_project_delete"}]})
    step(run, 2, "tool_call", at_ms=500, tool_name="tracker_project_delete", arguments={"pk": 1},
         state="awaiting_confirmation", summary="Delete the project “Home” and its 4 tasks")

    body = viewer_client.get(f"{RUNS}{run.pk}/change/").content.decode()

    summary = body.split('id="run-timeline"')[0]
    assert "pending" in summary
    assert re.search(r"128\s*tokens so far", summary), summary  # not the run's 0 until it is totalled
    assert re.search(r"1 model call.*1 tool call", summary, flags=re.S)
    rows = timeline_rows(body)
    assert 'data-effect="waiting"' in rows["2"] and "Delete the project “Home” and its 4 tasks" in rows["2"]

    listing = viewer_client.get(RUNS).content.decode()
    assert "pending" in listing


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_run_waiting_for_approval_shows_its_steps_and_pending_counts(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str], superuser_client: Client
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "one"}},
                        {"name": "tracker_task_list", "arguments": {"search": "milk"}},
                        {"name": "tracker_task_create", "arguments": {"project": home.pk + 999, "title": "x"}}]},
        {"tool_calls": [{"name": "test_forget_effects", "arguments": {"label": "one"}}]},
        {"text": "Forgotten."},
    )
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=alice, content="record, look, add, forget").run
    run = wait_for_run(run.pk, "awaiting_confirmation")
    assert run.total_tokens == 0  # the run's own counters are totalled only when it ends

    body = superuser_client.get(f"{RUNS}{run.pk}/change/").content.decode()

    rows = timeline_rows(body)
    effects = {seq: re.search(r'data-effect="([\w-]+)"', html).group(1) for seq, html in rows.items()}
    assert effects == {"1": "model", "2": "done", "3": "read", "4": "no-effect", "5": "model", "6": "waiting"}
    steps_tokens = sum(s.prompt_tokens + s.completion_tokens for s in run.steps.all())
    assert steps_tokens > 0
    summary = body.split('id="run-timeline"')[0]
    assert "pending" in summary and f"{steps_tokens:,} tokens so far" in summary
    assert re.search(r"2 model calls.*4 tool calls.*1 failed", summary, flags=re.S), summary


def test_evidence_cannot_be_added_changed_or_deleted_from_the_admin(
    superuser_client: Client, all_perms_client: Client, alice: Any
) -> None:
    run = a_run(alice, "keep me", reply="kept")
    step_row = AgentStep.objects.create(run=run, seq=1, kind="model_call")
    memory = AgentMemory.objects.create(owner=alice, content="likes tea", embedding=[0.1, 0.2], embedder="t")
    message = run.messages.first()
    objects = {"agentrun": run, "agentstep": step_row, "agentmessage": message, "agentmemory": memory,
               "agentchat": run.chat}
    for client in (superuser_client, all_perms_client):
        for name, obj in objects.items():
            base = f"/admin/assistant/{name}/"
            listing = client.get(base)
            assert listing.status_code == 200, name
            page = client.get(f"{base}{obj.pk}/change/")
            assert page.status_code == 200, name  # viewing works
            text = listing.content.decode() + page.content.decode()
            assert f"{base}add/" not in text, name
            assert f"{base}{obj.pk}/delete/" not in text and 'value="delete_selected"' not in text, name
            assert 'name="_save"' not in text and 'name="_continue"' not in text, name
            assert client.get(f"{base}add/").status_code == 403, name
            assert client.post(f"{base}add/", {}).status_code == 403, name
            assert client.get(f"{base}{obj.pk}/delete/").status_code == 403, name
            assert client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403, name
            assert client.post(f"{base}{obj.pk}/change/", {}).status_code == 403, name
            # The bulk delete action is not there to be posted either.
            client.post(base, {"action": "delete_selected", "_selected_action": [obj.pk], "index": 0,
                               "post": "yes"})
            assert type(obj).objects.filter(pk=obj.pk).exists(), name
    run.refresh_from_db()
    assert run.reply == "kept"


def test_the_setting_gives_staff_back_change_and_delete(superuser_client: Client, alice: Any) -> None:
    run = a_run(alice, "prune me by hand")
    with assistant_settings_with(ADMIN_EVIDENCE_EDITABLE=True):
        page = superuser_client.get(f"{RUNS}{run.pk}/change/").content.decode()
        assert 'name="_save"' in page and f"{RUNS}{run.pk}/delete/" in page
        assert superuser_client.get(f"{RUNS}add/").status_code == 200
        response = superuser_client.post(f"{RUNS}{run.pk}/delete/", {"post": "yes"})
        assert response.status_code == 302
    assert not AgentRun.objects.filter(pk=run.pk).exists()


def test_the_run_list_filters_and_searches_as_staff_review(
    viewer_client: Client, alice: Any, bob: Any
) -> None:
    answered = a_run(alice, "what are my open tasks?", reply="Three: milk, bread, eggs.")
    limited = a_run(alice, "do everything", status="failed", stop_reason="max_tool_calls",
                    error="The assistant reached its limit of tool calls.")
    cancelled = a_run(bob, "delete Home", status="cancelled", stop_reason="superseded",
                      error="Superseded by a newer message.", created_ago=timedelta(days=40))
    liked = a_run(bob, "rename Home", reply="Renamed.", quality_score=1.0)
    failing = a_run(bob, "add a task", reply="I could not.")
    AgentStep.objects.create(run=failing, seq=1, kind="tool_call", tool_name="tracker_task_create",
                             took_effect=True, result={"status": "done", "took_effect": True})
    AgentStep.objects.create(run=failing, seq=2, kind="tool_call", tool_name="tracker_task_create",
                             took_effect=False, result={"status": "invalid", "took_effect": False})
    AgentStep.objects.create(run=answered, seq=1, kind="tool_call", tool_name="tracker_task_create",
                             took_effect=True, result={"status": "done", "took_effect": True})

    assert set(listed(viewer_client, "?stop_reason=max_tool_calls")) == {limited.pk}
    assert set(listed(viewer_client, "?status=cancelled")) == {cancelled.pk}
    assert set(listed(viewer_client, "?error__isnull=False")) == {limited.pk, cancelled.pk}
    assert set(listed(viewer_client, "?error__isnull=True")) == {answered.pk, liked.pk, failing.pk}
    assert set(listed(viewer_client, "?error=Superseded%20by%20a%20newer%20message.")) == {cancelled.pk}
    assert set(listed(viewer_client, f"?owner__id__exact={bob.pk}")) == {cancelled.pk, liked.pk, failing.pk}
    assert set(listed(viewer_client, "?spec=default")) == {answered.pk, limited.pk, cancelled.pk, liked.pk,
                                                            failing.pk}
    assert set(listed(viewer_client, "?quality_score=1.0")) == {liked.pk}
    assert liked.pk not in listed(viewer_client, "?quality_score__isnull=True")
    assert set(listed(viewer_client, "?feedback=up")) == {liked.pk}
    today = timezone.localdate()
    recent = listed(viewer_client, f"?created_at__gte={today - timedelta(days=7)}&created_at__lt="
                                   f"{today + timedelta(days=1)}")
    assert set(recent) == {answered.pk, limited.pk, liked.pk, failing.pk}
    # Runs where a tool failed: the conditions hold for one and the same step, and each run is listed once.
    assert listed(viewer_client, "?steps__tool_name=tracker_task_create&steps__took_effect=0"
                                 "&steps__kind=tool_call") == [failing.pk]
    assert set(listed(viewer_client, "?steps__tool_name=tracker_task_create")) == {failing.pk, answered.pk}
    # The dashboard's "failed calls" link: by the call's outcome, which tells a failure from a read.
    failed_calls = "&steps__result__status__in=declined,denied,error,invalid,not_found,unknown"
    assert listed(viewer_client, "?steps__kind=tool_call&steps__tool_name=tracker_task_create" + failed_calls) == [
        failing.pk]
    # Search: the owner's username, the person's question, the reply, the error.
    assert set(listed(viewer_client, "?q=bob")) == {cancelled.pk, liked.pk, failing.pk}
    assert set(listed(viewer_client, "?q=open+tasks")) == {answered.pk}
    assert set(listed(viewer_client, "?q=bread")) == {answered.pk}
    assert set(listed(viewer_client, "?q=limit+of+tool")) == {limited.pk}
    # The sidebar offers the filters.
    page = viewer_client.get(RUNS).content.decode()
    for title in ("By status", "By stop reason", "By error", "By spec", "By owner", "By feedback", "By created"):
        assert title.lower() in page.lower(), title
    # A date that is no date is the admin's "invalid filter" page, not an error.
    assert viewer_client.get(RUNS + "?created_at__gte=2026-13-45")["Location"].endswith("?e=1")
    # A lookup outside the allow-list is refused, not silently run.
    assert viewer_client.get(RUNS + "?owner__password__startswith=p").status_code == 400


def _csv(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response.streaming
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_the_filtered_run_list_exports_as_csv(viewer_client: Client, alice: Any, bob: Any) -> None:
    failed = [a_run(alice, f"question {n}", status="failed", stop_reason="model_error", error="boom")
              for n in range(3)]
    a_run(alice, "fine", reply="ok")
    formula = a_run(bob, "=cmd|' /C calc'!A0", status="failed", stop_reason="model_error",
                    error="=HYPERLINK(\"http://evil.example\")")
    query = "?status=failed&o=1"
    shown = listed(viewer_client, query)
    assert len(shown) == 4

    page = viewer_client.get(RUNS + query).content.decode()
    assert "Export these 4 runs as CSV" in page
    everything = viewer_client.post(RUNS + query, {"action": "export_csv", "select_across": "1", "index": "0",
                                                   "_selected_action": [shown[0]]})
    rows = _csv(everything)
    assert [int(row["id"]) for row in rows] == shown
    by_id = {int(row["id"]): row for row in rows}
    assert by_id[failed[0].pk]["question"] == "question 0" and by_id[failed[0].pk]["owner"] == "alice"
    assert by_id[failed[0].pk]["stop_reason"] == "model_error" and by_id[failed[0].pk]["error"] == "boom"
    # A cell a spreadsheet would run as a formula is written as text.
    assert by_id[formula.pk]["error"].startswith("'=") and by_id[formula.pk]["question"].startswith("'=")

    picked = viewer_client.post(RUNS + query, {"action": "export_csv", "index": "0",
                                               "_selected_action": [failed[1].pk, failed[2].pk]})
    assert sorted(int(row["id"]) for row in _csv(picked)) == sorted([failed[1].pk, failed[2].pk])
