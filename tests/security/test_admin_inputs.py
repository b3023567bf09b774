"""Whatever a staff member puts in an admin address, the assistant's and the registry's admin pages answer
with a page, a message or an empty list — never a server error.

Walks every list and every record page of both apps, signed in through the admin's login form, with the
values that broke them or could: NUL (PostgreSQL text cannot hold it), very long text, numbers past any
column's range, dates outside the calendar, in every parameter each list takes (its filters, the search,
the ordering, the page, the date drill-down), in parameters it does not take, and in a record's id.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from assistant.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import token_create
from assistant.models import (
    AgentAllowance,
    AgentChat,
    AgentMemory,
    AgentMessage,
    AgentPlan,
    AgentRun,
    AgentStep,
)
from registry.admin_queries import LIST_PARAMETERS
from registry.models import AgentProfile
from registry.services import profile_record_invocation

pytestmark = pytest.mark.django_db

APPS = ("assistant", "assistant_mcp", "assistant_evals", "registry")
HUGE = "9" * 40
VALUES = (
    "\x00", "a\x00b", "x" * 100_000, "😀" * 5_000, HUGE, f"-{HUGE}", "9223372036854775808", "1e400", "nan", "-1", "0",
    "0000-00-00", "9999-12-31", "99999-01-01", "2026-02-30", "2026-01-01T25:61:00+99:00", "", " ", "True",
    "a,b,\x00", "%", "\\", "'", "\ufffd",
)
# Searches: very many words, and one long word.
SEARCHES = (" ".join(["word"] * 5_000), "w" * 5_000, "\x00", "'; --")
OBJECT_IDS = ("\x00", HUGE, f"-{HUGE}", "9223372036854775808", "x" * 10_000, "0", "-1", "1e3", "%00", "😀")


def _admins() -> list[tuple[type, Any]]:
    return [(model, model_admin) for model, model_admin in admin.site._registry.items()
            if model._meta.app_label in APPS]


@pytest.fixture
def staff(user_factory: Callable[..., Any]) -> Client:
    """Staff who may view every record of both apps, signed in through the admin's login form."""
    member = user_factory("reviewer", is_staff=True)
    member.user_permissions.set(Permission.objects.filter(content_type__app_label__in=APPS,
                                                          codename__startswith="view_"))
    browser = Client(raise_request_exception=False)
    assert browser.post("/admin/login/", {"username": "reviewer", "password": "pw", "next": "/admin/"}
                        ).status_code == 302
    return browser


@pytest.fixture
def records(alice: Any) -> dict[type, Any]:
    """One of each, so every filter has choices and every list has rows."""
    chat = AgentChat.objects.create(owner=alice, title="Groceries")
    run = AgentRun.objects.create(owner=alice, chat=chat, status="failed", stop_reason="model_error", error="boom",
                                  model="offline", quality_score=1.0)
    message = AgentMessage.objects.create(chat=chat, owner=alice, role="user", content="buy milk", run=run)
    step = AgentStep.objects.create(run=run, seq=1, kind="tool_call", tool_name="tracker_task_create",
                                    result={"status": "error", "took_effect": False}, took_effect=False)
    memory = AgentMemory.objects.create(owner=alice, content="likes milk", embedding=[0.1] * 4, dims=4,
                                        embedder="test")
    plan = AgentPlan.objects.create(run=run, revision=1, made_in=step, steps=[
        {"n": 1, "do": "Add the task", "tool": "tracker_task_create", "member": "", "member_note": "",
         "status": "failed", "step_ids": [step.pk], "why": "boom"}])
    profile = profile_record_invocation(owner=alice, spec_name="default", entry={
        "run_id": run.pk, "status": "error", "duration_ms": 10, "tool_calls": 1, "tool_errors": 1,
        "tools_used": ["tracker_task_create"], "failed_tools": ["tracker_task_create"]})
    token = token_create(owner=alice, name="Laptop").token
    eval_set = EvalSet.objects.create(name="groceries")
    case = EvalCase.objects.create(eval_set=eval_set, source_run=run, source_run_number=run.pk, owner=alice,
                                   owner_username="alice", spec="default", question="buy milk",
                                   recording={"steps": [], "reply": "boom", "status": "failed"},
                                   expectations={"reply": {"nonempty": True}}, reason="failed")
    eval_run = EvalRun.objects.create(eval_set=eval_set, candidates=[{"label": "offline", "model": "offline"}])
    result = EvalResult.objects.create(eval_run=eval_run, case=case, candidate="offline", status="graded",
                                       passed=False, score=0.0, total_tokens=12, duration_ms=40, grades=[
                                           {"grader": "reply", "passed": False, "score": 0.0, "detail": "",
                                            "deviations": ["the reply lacks an answer"]}])
    allowance = AgentAllowance.objects.create(user=alice, tokens_per_day=20_000)
    return {AgentChat: chat, AgentRun: run, AgentMessage: message, AgentStep: step, AgentMemory: memory,
            AgentPlan: plan, AgentProfile: profile, AccessToken: token, EvalSet: eval_set, EvalCase: case,
            EvalRun: eval_run, EvalResult: result, AgentAllowance: allowance}


# The parameters the lists' filters and the links to them use (each list refuses those of the others), the
# list pages' own, and some no list takes.
PARAMETERS = frozenset({
    "status", "stop_reason", "error", "error__isnull", "spec", "spec__isnull", "model", "owner__id__exact",
    "owner__isnull", "quality_score", "quality_score__isnull", "feedback", "created_at__gte", "created_at__lt",
    "steps__tool_name", "steps__kind", "steps__took_effect", "steps__result__status__in", "kind__exact",
    "state__exact", "took_effect__exact", "role__exact", "embedder", "dims", "deleted_at__isempty", "spec_name",
    "scope", "plan", "plan_member", "revision", "step_status", "approval__exact", "approval__isnull", "channel",
    "read_only__exact", "state",
    "o", "p", "all", "_facets", "e", "_popup", "_to_field",
    "session_key__regex", "id__gt", "client_address", "\x00",
})


# A parameter a list does not take is refused before its value is looked at: a few values show it is, for each.
FOREIGN_VALUES = ("\x00", HUGE)


def _parameters(model_admin: Any) -> list[tuple[str, tuple[str, ...]]]:
    """Each parameter with the values to try in it: all of them where the list takes it, a few elsewhere."""
    own = set(getattr(model_admin, "lookups_allowed", frozenset)()) | LIST_PARAMETERS | {"_to_field"}
    return [(name, VALUES if name in own else FOREIGN_VALUES) for name in sorted(PARAMETERS | own)]


def _check(browser: Client, url: str, failures: list[str]) -> None:
    answer = browser.get(url)
    if answer.status_code >= 500:
        failures.append(f"{answer.status_code} {url[:160]!r}: {getattr(answer, 'exc_info', None)}")
        return
    if answer.status_code in (301, 302) and answer["Location"].startswith("/"):
        followed = browser.get(answer["Location"])
        if followed.status_code >= 500:
            failures.append(f"{followed.status_code} after {url[:160]!r} → {answer['Location'][:160]!r}")


# Thousands of admin pages, one after another: the hang guard allows for a busy machine.
@pytest.mark.timeout(600)
def test_every_admin_list_of_both_apps_answers_any_value_of_any_parameter(
    staff: Client, records: dict[type, Any]
) -> None:
    failures: list[str] = []
    for model, model_admin in _admins():
        base = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for name, values in _parameters(model_admin):
            for value in values:
                _check(staff, f"{base}?{urlencode({name: value})}", failures)
        for search in SEARCHES:
            _check(staff, f"{base}?{urlencode({'q': search})}", failures)
        if model_admin.date_hierarchy:
            for year, month, day in [("9999", "12", "31"), ("9998", "12", "31"), ("1", "1", "1"), ("0", "1", "1"),
                                     (HUGE, "1", "1"), ("2026", HUGE, "1"), ("2026", "2", "31")]:
                drill = {f"{model_admin.date_hierarchy}__year": year, f"{model_admin.date_hierarchy}__month": month,
                         f"{model_admin.date_hierarchy}__day": day}
                _check(staff, f"{base}?{urlencode(drill)}", failures)
                _check(staff, f"{base}?{urlencode({k: v for k, v in drill.items() if 'day' not in k})}", failures)
    assert not failures, "\n".join(failures)


def test_every_record_page_of_both_apps_answers_any_id_and_parameter(staff: Client, records: dict[type, Any]) -> None:
    failures: list[str] = []
    for model, _model_admin in _admins():
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        for object_id in (*OBJECT_IDS, str(records[model].pk)):
            for page in ("change", "history"):
                _check(staff, reverse(f"{name}_{page}", args=["0"]).replace("/0/", f"/{_quoted(object_id)}/"),
                       failures)
        for value in VALUES:
            for parameter in ("_changelist_filters", "_to_field", "_popup"):
                _check(staff, f"{reverse(f'{name}_change', args=[records[model].pk])}?{urlencode({parameter: value})}",
                       failures)
    assert not failures, "\n".join(failures)


def test_a_refused_value_is_said_in_words(staff: Client, records: dict[type, Any]) -> None:
    page = staff.get("/admin/assistant/agentrun/?q=%00")
    assert page.status_code == 400
    assert "NUL" in page.content.decode()
    page = staff.get("/admin/assistant/agentrun/?" + urlencode({"created_at__year": "9999"}))
    assert page.status_code == 400
    assert "created_at__year" in page.content.decode()
    # A date that is no date: Django shows the list without its filters; the page now says why.
    redirected = staff.get("/admin/assistant/agentrun/?created_at__gte=2026-13-45", follow=True)
    assert redirected.redirect_chain[-1][0].endswith("?e=1")
    assert "could not be filtered as asked" in redirected.content.decode()


def _quoted(object_id: str) -> str:
    from urllib.parse import quote

    return quote(object_id, safe="")


def test_every_filter_of_every_list_is_one_its_list_takes(staff: Client, records: dict[type, Any]) -> None:
    """So that a filter added to a list but not to its `allowed_lookups` fails here, not for staff."""
    for model, model_admin in _admins():
        page = staff.get(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"))
        assert page.status_code == 200, model
        offered = {name for spec in page.context["cl"].filter_specs for name in spec.expected_parameters()}
        assert offered <= model_admin.lookups_allowed(), (model, offered - model_admin.lookups_allowed())


def test_every_link_to_the_run_list_from_the_dashboard_and_a_runs_page_is_taken(
    staff: Client, records: dict[type, Any]
) -> None:
    run = records[AgentRun]
    pages = [staff.get(reverse("admin:assistant_agentrun_dashboard")),
             staff.get(reverse("admin:assistant_agentrun_change", args=[run.pk]))]
    runs = reverse("admin:assistant_agentrun_changelist")
    links = {html.unescape(href) for page in pages
             for href in re.findall(r'href="([^"]+)"', page.content.decode()) if href.startswith(runs + "?")}
    assert len(links) > 10  # the dashboard's figures, bars and tables, and "all their runs"
    refused = [link for link in links if staff.get(link).status_code != 200]
    assert not refused, refused
