"""A view tool whose view answers with a page meant for a browser.

The model must hear that the tool gave nothing it can read (never an empty success), the developer
a logged warning naming the view and the fix, and — where it can be proved without running the view
— a system check. The views are in tests/testapp/views.py; tools the suite declares only here are
declared inside `register_temporarily()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.decorators import login_required
from django.core.checks import CheckMessage
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_POST
from django.views.generic import DetailView, ListView, View

from assistant.conversation.services import chat_send
from assistant.models import AgentStep
from assistant.tools import execute_tool, register_temporarily, registry, tool
from assistant.tools.checks import check_tools
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp import views
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db

PAGE_CHECKS = {"assistant.W015", "assistant.W016", "assistant.E016"}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.levelno == logging.WARNING and record.name.startswith("assistant.tools")]


def _page_checks(tool_name: str) -> dict[str, str]:
    """The page-related system check messages about one tool, by id."""
    found: dict[str, str] = {}
    for message in check_tools(None):
        if message.id in PAGE_CHECKS and repr(tool_name) in message.msg:
            found[message.id] = _text(message)
    return found


def _text(message: CheckMessage) -> str:
    return f"{message.msg} HINT: {message.hint}"


@contextmanager
def declared(view: Any, name: str, **options: Any) -> Iterator[None]:
    """Declare `view` a tool for the block. Never pass a view the suite declares itself: @tool marks
    the view, and the mark would stay after the block."""
    with register_temporarily():
        tool(name=name, description="Test suite: a tool declared by tests/tools/test_tools_pages.py.", **options)(view)
        yield


# --- reads --------------------------------------------------------------------------------------


def test_a_read_that_renders_a_plain_page_tells_the_model_it_got_nothing_readable(
    alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    Effect.objects.create(owner=alice, label="kept")
    caplog.set_level(logging.WARNING)

    outcome = execute_tool(alice, "test_note_page", {})

    answer = outcome.to_model()
    assert (answer["status"], answer["took_effect"]) == ("error", False), answer
    assert "page" in answer["reason"] and "cannot be read as data" in answer["reason"]
    assert "again" in answer["reason"]  # the model is told retrying will not help
    assert "data" not in answer  # not an empty result it could mistake for "you have nothing"
    [warning] = _warnings(caplog)
    assert "'test_note_page'" in warning and "tests.testapp.views.note_page" in warning
    for fix in ("TemplateResponse", "fields=", "JsonResponse", "readable("):
        assert fix in warning, warning


def test_a_detail_view_tool_without_fields_says_to_declare_them(
    alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    effect = Effect.objects.create(owner=alice, label="kept")
    caplog.set_level(logging.WARNING)

    with declared(views.EffectDetailView, "test_effect_detail"):
        outcome = execute_tool(alice, "test_effect_detail", {"pk": effect.pk})
        checks = _page_checks("test_effect_detail")

    assert (outcome.status, outcome.took_effect) == ("error", False), outcome
    assert "cannot be read as data" in outcome.reason
    [warning] = _warnings(caplog)
    assert "tests.testapp.views.EffectDetailView" in warning and "fields=" in warning
    assert list(checks) == ["assistant.W015"]
    assert "EffectDetailView" in checks["assistant.W015"] and "fields=" in checks["assistant.W015"]


def test_a_detail_view_tool_with_fields_answers_them(alice: Any, caplog: pytest.LogCaptureFixture) -> None:
    effect = Effect.objects.create(owner=alice, label="kept")
    caplog.set_level(logging.WARNING)

    with declared(views.EffectDetailView, "test_effect_detail", fields=["id", "label", "owner__username"]):
        outcome = execute_tool(alice, "test_effect_detail", {"pk": effect.pk})
        checks = _page_checks("test_effect_detail")

    assert (outcome.status, outcome.data) == ("data", {"id": effect.pk, "label": "kept", "owner__username": "alice"})
    assert _warnings(caplog) == [] and checks == {}


def test_a_misspelled_field_is_named_instead_of_answered_as_null(
    alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    effect = Effect.objects.create(owner=alice, label="kept")
    caplog.set_level(logging.WARNING)

    with declared(views.EffectDetailView, "test_effect_detail", fields=["id", "lable", "owner__usernme"]):
        outcome = execute_tool(alice, "test_effect_detail", {"pk": effect.pk})
        checks = _page_checks("test_effect_detail")

    assert (outcome.status, outcome.took_effect) == ("error", False), outcome
    assert "lable" in outcome.reason and "owner__usernme" in outcome.reason
    assert outcome.data is None  # no half answer with nulls the model would take for real values
    [warning] = _warnings(caplog)
    assert "tests.testapp.views.EffectDetailView" in warning and "'lable'" in warning
    # The view builds its own queryset, which could annotate a 'lable': only the related field is provably
    # misspelt. A view that keeps Django's own lookup has nothing but its model's fields to offer.
    assert list(checks) == ["assistant.E016"]
    assert "'owner__usernme'" in checks["assistant.E016"] and "'lable'" not in checks["assistant.E016"]
    assert "testapp.Effect" in checks["assistant.E016"]
    with declared(_DjangosOwnLookup, "test_plain_detail", fields=["id", "lable", "pk", "owner__username"]):
        checks = _page_checks("test_plain_detail")
    assert list(checks) == ["assistant.E016"]
    assert "'lable'" in checks["assistant.E016"]
    assert "'pk'" not in checks["assistant.E016"] and "'id'" not in checks["assistant.E016"]


class _DjangosOwnLookup(DetailView):  # declared as a tool only for the checks: never routed
    model = Effect


class _Annotated(ListView):  # declared as a tool only for the checks: never routed
    queryset = Effect.objects.annotate(same_label=Count("owner__effect"))


def test_annotations_and_properties_are_not_taken_for_misspellings() -> None:
    with declared(_Annotated, "test_annotated", fields=["label", "same_label", "owner__is_anonymous"]):
        assert _page_checks("test_annotated") == {}


def test_a_page_with_fields_but_no_object_in_its_context_says_what_is_missing(
    alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    with declared(views.NotesView, "test_notes", fields=["label"]):
        outcome = execute_tool(alice, "test_notes", {})
        checks = _page_checks("test_notes")

    assert (outcome.status, outcome.took_effect) == ("error", False), outcome
    [warning] = _warnings(caplog)
    assert "tests.testapp.views.NotesView" in warning
    assert "object" in warning and "object_list" in warning
    assert list(checks) == ["assistant.W015"]


def test_a_paginated_list_says_it_shows_only_part_of_the_rows(alice: Any) -> None:
    for label in ("one", "two", "three"):
        Effect.objects.create(owner=alice, label=label)

    with declared(views.EffectListView, "test_effect_list", fields=["label"]):
        outcome = execute_tool(alice, "test_effect_list", {})

    assert outcome.status == "data", outcome
    # The view shows two a page: the model must not take the first page for all there is.
    assert outcome.data == {"results": [{"label": "one"}, {"label": "two"}], "truncated": True}


def test_a_json_media_type_other_than_application_json_is_read_as_json(
    alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    outcome = execute_tool(alice, "test_problem_json", {})

    assert (outcome.status, outcome.data) == ("data", {"title": "Out of stock", "status": 200}), outcome
    assert _warnings(caplog) == []


# --- writes -------------------------------------------------------------------------------------


def test_a_write_that_renders_a_page_instead_of_redirecting_is_undone_and_the_model_told(
    alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    outcome = execute_tool(alice, "test_note_page_save", {"label": "lost"})

    answer = outcome.to_model()
    assert (answer["status"], answer["took_effect"]) == ("error", False), answer
    assert "instead of redirecting" in answer["reason"] and "nothing was kept" in answer["reason"]
    # "Recorded lost." describes a change that was undone: it must not reach the model as news.
    assert "data" not in answer
    assert not Effect.objects.exists()
    [warning] = _warnings(caplog)
    assert "'test_note_page_save'" in warning and "tests.testapp.views.note_page_save" in warning
    assert "redirect" in warning and "TemplateResponse" in warning and "JsonResponse" in warning


# --- what the system checks can prove, and what they leave alone ---------------------------------


def test_the_checks_name_the_plain_page_read_and_write_views() -> None:
    read, write = _page_checks("test_note_page"), _page_checks("test_note_page_save")

    assert list(read) == ["assistant.W015"]
    assert "tests.testapp.views.note_page" in read["assistant.W015"] or "render()" in read["assistant.W015"]
    for fix in ("TemplateResponse", "fields=", "JsonResponse", "readable("):
        assert fix in read["assistant.W015"]
    assert list(write) == ["assistant.W016"]
    assert "redirect" in write["assistant.W016"]


def test_no_page_check_fires_for_the_tracker_or_the_suites_other_tools() -> None:
    cried = [(m.id, m.msg) for m in check_tools(None) if m.id in PAGE_CHECKS
             and "test_note_page" not in m.msg]
    assert cried == []
    assert any(d.name.startswith("tracker_") for d in registry.all())  # the tracker's tools were checked


def _json_helper(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True})


def _own_decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A decorator of the site's own, which may turn the page into anything: nothing is proved through it."""
    import functools

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return view(request, *args, **kwargs)

    return wrapper


@login_required
@require_GET
def _answers_through_a_helper(request: HttpRequest) -> HttpResponse:
    if request.GET.get("x"):
        return render(request, "testapp/notes.html")
    return _json_helper(request)


@_own_decorator
@require_GET
def _under_an_unknown_decorator(request: HttpRequest) -> HttpResponse:
    return render(request, "testapp/notes.html")


@require_GET
def _renders_json_from_a_template(request: HttpRequest) -> HttpResponse:
    return render(request, "testapp/notes.json", content_type="application/json")


@require_GET
def _renders_or_redirects(request: HttpRequest) -> HttpResponse:
    if request.GET.get("x"):
        return redirect("/")
    return render(request, "testapp/notes.html")


@require_GET
def _template_with_the_object(request: HttpRequest) -> HttpResponse:
    return TemplateResponse(request, "testapp/effect_detail.html", {"object": Effect.objects.first()})


@require_GET
def _template_naming_it_otherwise(request: HttpRequest) -> HttpResponse:
    return TemplateResponse(request, "testapp/effect_detail.html", {"effect": Effect.objects.first()})


@require_GET
def _template_with_a_context_built_elsewhere(request: HttpRequest) -> HttpResponse:
    context = {"object": Effect.objects.first()}
    return TemplateResponse(request, "testapp/effect_detail.html", context)


@require_GET
def _answers_with_a_json_header(request: HttpRequest) -> HttpResponse:
    return HttpResponse("{}", headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    ("view", "fields", "expected"),
    [
        (_answers_through_a_helper, None, set()),
        (_under_an_unknown_decorator, None, set()),
        (_renders_json_from_a_template, None, set()),
        (_answers_with_a_json_header, None, set()),
        (_renders_or_redirects, None, {"assistant.W015"}),
        (_renders_or_redirects, ["label"], {"assistant.W015"}),
        (_template_with_the_object, None, {"assistant.W015"}),
        (_template_with_the_object, ["label"], set()),
        (_template_naming_it_otherwise, ["label"], {"assistant.W015"}),
        (_template_with_a_context_built_elsewhere, ["label"], set()),
    ],
)
def test_the_read_check_fires_only_where_no_answer_can_be_read(
    view: Any, fields: list[str] | None, expected: set[str]
) -> None:
    with declared(view, "test_page_probe", fields=fields):
        assert set(_page_checks("test_page_probe")) == expected


# --- through a real run -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_in_a_run_the_model_hears_the_page_could_not_be_read_and_nothing_was_kept(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_note_page", "arguments": {}}]},
        {"tool_calls": [{"name": "test_note_page_save", "arguments": {"label": "lost"}}]},
        {"text": "That page cannot be read by me."},
    )
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=alice, content="show my notes, then add one").run
    run = wait_for_run(run.pk, "succeeded", "failed", "cancelled", "timed_out")

    assert run.status == "succeeded", run.error
    read, write = run.steps.filter(kind=AgentStep.Kind.TOOL_CALL).order_by("seq")
    # What each step holds is the tool message the model was handed next.
    assert (read.result["status"], read.took_effect) == ("error", False)
    assert "cannot be read as data" in read.result["reason"] and "data" not in read.result
    assert (write.result["status"], write.took_effect) == ("error", False)
    assert "nothing was kept" in write.result["reason"]
    assert run.tool_errors == 2
    assert not Effect.objects.exists()


class _PostsAPage(View):
    def post(self, request: HttpRequest) -> HttpResponse:
        return render(request, "testapp/notes.html")


@require_POST
def _renders_on_errors_redirects_on_success(request: HttpRequest) -> HttpResponse:
    if not request.POST.get("label"):
        return render(request, "testapp/notes.html")
    return redirect("/")


@require_POST
def _answers_json(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"recorded": True})


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (_PostsAPage, {"assistant.W016"}),
        (_renders_on_errors_redirects_on_success, set()),
        (_answers_json, set()),
    ],
)
def test_the_write_check_fires_only_where_no_answer_is_a_redirect(view: Any, expected: set[str]) -> None:
    with declared(view, "test_write_probe", method="POST"):
        assert set(_page_checks("test_write_probe")) == expected
