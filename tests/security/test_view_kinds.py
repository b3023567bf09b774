"""What is not declared or provably a read is a write (issue 9, item 4).

A view tool that only reads is offered under the `restricted` profile and runs outside a transaction;
so "read" must be proved: a declared `method="GET"`, a function view that accepts only safe methods
(`require_GET`, `require_safe`), or one of Django's display views whose GET handler is Django's own.
Everything else is a write: offered only where writes are, fired as a POST inside a transaction.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import override_settings
from django.urls import include, path
from django.views import View
from django.views.decorators.http import require_GET, require_http_methods, require_POST, require_safe
from django.views.generic import DetailView, ListView, TemplateView

from assistant.conversation.services import chat_send
from assistant.models import AgentStep
from assistant.tools import execute_tool, register_temporarily, registry, tool, tools_for
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp.models import Effect


class TaskList(ListView):
    """List tasks."""

    template_name = "unused.html"


class TaskDetail(DetailView):
    """One task."""

    template_name = "unused.html"


class About(TemplateView):
    """About."""

    template_name = "unused.html"


class CountingDetail(DetailView):
    """A detail view whose GET handler is its own: it might do anything."""

    template_name = "unused.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return HttpResponse()


class Ping(View):
    """A bare view with a GET handler."""

    def get(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse()


def _wrapped(*decorators: Callable[[Any], Any]) -> Callable[..., Any]:
    """A fresh function view under `decorators` (innermost last), so each case declares its own."""

    def view(request: HttpRequest) -> JsonResponse:
        """Answer."""
        return JsonResponse({"method": request.method})

    for decorator in reversed(decorators):
        view = decorator(view)
    return view


CASES = [
    pytest.param(_wrapped(), {}, "write", "nothing declares or proves", id="function-view-declaring-nothing"),
    pytest.param(_wrapped(require_GET), {}, "read", "accepts only GET", id="require_GET"),
    pytest.param(_wrapped(require_safe), {}, "read", "accepts only GET, HEAD", id="require_safe"),
    pytest.param(_wrapped(require_http_methods(["GET", "POST"])), {}, "write", "accepts POST",
                 id="require_http_methods-GET-POST"),
    pytest.param(_wrapped(require_POST), {}, "write", "accepts only POST", id="require_POST"),
    pytest.param(_wrapped(), {"method": "GET"}, "read", "declared method='GET'", id="declared-GET"),
    pytest.param(_wrapped(require_GET), {"method": "POST"}, "write", "declared method='POST'", id="declared-POST"),
    pytest.param(TaskList, {}, "read", "ListView", id="ListView"),
    pytest.param(TaskDetail, {}, "read", "DetailView", id="DetailView"),
    pytest.param(About, {}, "read", "TemplateView", id="TemplateView"),
    pytest.param(CountingDetail, {}, "write", "overrides get()", id="DetailView-with-its-own-get"),
    pytest.param(Ping, {}, "write", "nothing proves", id="bare-View"),
]


@pytest.mark.parametrize(("view", "declared", "kind", "reason"), CASES)
def test_a_view_is_a_read_only_when_declared_or_proved(view: Any, declared: dict[str, Any], kind: str,
                                                          reason: str) -> None:
    with register_temporarily():
        tool(name="test_kind", **declared)(view)
        definition = registry.get("test_kind")

        assert definition.kind == kind
        assert definition.method == ("GET" if kind == "read" else "POST")
        assert reason in definition.kind_reason


# A URLconf for the undeclared function views below.
def undeclared_write_then_crash(request: HttpRequest) -> JsonResponse:
    """Writes, then fails."""
    get_user_model().objects.create_user(username="written-before-the-crash")
    raise RuntimeError("boom")


urlpatterns = [
    path("test-tools/", include("tests.testapp.urls")),
    path("crash/", undeclared_write_then_crash, name="crash"),
]


@pytest.mark.django_db
@override_settings(ROOT_URLCONF=__name__)
def test_an_undeclared_function_view_is_not_offered_as_a_read_and_its_writes_are_undone(alice: Any) -> None:
    with register_temporarily():
        tool(name="test_undeclared_crash")(undeclared_write_then_crash)

        restricted = {t.name for t in tools_for(alice, profile="restricted")}
        assert {"test_undeclared_crash", "test_undeclared_effect"}.isdisjoint(restricted)
        denied = execute_tool(alice, "test_undeclared_effect", {"label": "restricted"}, profile="restricted")
        assert (denied.status, denied.took_effect) == ("denied", False)
        assert not Effect.objects.exists()

        outcome = execute_tool(alice, "test_undeclared_crash", {})
        assert outcome.status == "error"
        assert not get_user_model().objects.filter(username="written-before-the-crash").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_run_under_a_restricted_spec_cannot_fire_an_undeclared_function_view(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"name": "test_undeclared_effect", "arguments": {"label": "sneaked"}}]},
                   {"text": "Tried."})

    with assistant_settings_with(MODEL=model, SPEC="test-reader"):
        run = chat_send(user=alice, content="record it").run
    wait_for_run(run.pk, "succeeded")

    step = AgentStep.objects.get(run_id=run.pk, kind=AgentStep.Kind.TOOL_CALL)
    assert (step.result["status"], step.took_effect) == ("denied", False)
    assert not Effect.objects.exists()


def _check_report(**options: Any) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("check", stdout=out, stderr=err, **options)
    return (out.getvalue() + err.getvalue()).splitlines()


def test_manage_py_check_says_how_each_view_tool_was_classified() -> None:
    # Every command runs the checks: a plain one says only what needs a fix, never which reads were proved.
    everyday = _check_report()
    assert not [line for line in everyday if "(assistant.I010)" in line], everyday
    # Asked for (`check --deploy --tag assistant_tools`), the tools' checks and the proofs, nothing else.
    report = _check_report(deploy=True, tags=["assistant_tools"])
    assert {check_id for line in report for check_id in re.findall(r"\((\w+\.\w+)\)", line)} <= {
        "assistant.I010", "assistant.W013", "assistant.W015", "assistant.W016"}, report

    def said(check_id: str, lines: list[str] = report) -> str:
        return "\n".join(line for line in lines if f"({check_id})" in line)

    assert said("assistant.W013") == said("assistant.W013", everyday)
    reads = said("assistant.I010")
    assert "'tracker_project_stats' is a read: it accepts only GET (require_GET)" in reads
    assert "'tracker_task_detail' is a read: TaskDetailView is Django's DetailView" in reads
    assert "test_undeclared_effect" not in reads
    assert "'test_undeclared_effect' is treated as a write: nothing declares or proves it only reads" in \
        said("assistant.W013")
    # Declared and provable writes need no word: a form view, a delete view, form=, require_POST.
    assert not [line for line in report if "tracker_task_create" in line or "tracker_task_delete" in line]
