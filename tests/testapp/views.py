from __future__ import annotations

import time

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST
from django.views.generic import DeleteView, DetailView, ListView, TemplateView

from assistant.tools import tool
from tests.testapp.models import Effect
from tracker.views import TaskUpdateView


@tool(name="test_record_effect", method="POST", description="Record that something happened, with a label.")
@login_required
@require_POST
def record_effect(request: HttpRequest, *, label: str) -> JsonResponse:
    Effect.objects.create(owner=request.user, label=label)
    return JsonResponse({"recorded": label, "count": Effect.objects.filter(owner=request.user, label=label).count()})


@tool(name="test_slow_effect", method="POST", description="Record an effect, then take a while to answer.")
@login_required
@require_POST
def slow_effect(request: HttpRequest, *, label: str, seconds: float) -> JsonResponse:
    Effect.objects.create(owner=request.user, label=label)
    time.sleep(min(seconds, 30.0))
    return JsonResponse({"recorded": label})


@tool(name="test_wait", description="Wait a number of seconds and answer; changes nothing.")
@login_required
@require_GET
def wait(request: HttpRequest, *, seconds: float) -> JsonResponse:
    time.sleep(min(seconds, 30.0))
    return JsonResponse({"waited": seconds})


# A function view that declares neither a method nor a form: nothing proves it only reads, so the
# assistant must treat it as a write (offered only where writes are, run as a POST in a transaction).
@tool(name="test_undeclared_effect", description="Test suite: record a label through a view that declares no method.")
@login_required
def undeclared_effect(request: HttpRequest, *, label: str) -> JsonResponse:
    Effect.objects.create(owner=request.user, label=label)
    return JsonResponse({"recorded": label})


# Overlapping URL patterns (see urls.py): each tool's own address can resolve to another view, or to
# itself with other arguments than the model chose. Each view records which view really ran.
@tool(name="test_overlap_note", method="POST",
      description="Test suite: record a note under a name that may hold slashes.")
@login_required
@require_POST
def overlap_note(request: HttpRequest, name: str) -> JsonResponse:
    Effect.objects.create(owner=request.user, label=f"note:{name}")
    return JsonResponse({"noted": name})


@login_required
@require_POST
def overlap_other(request: HttpRequest, pk: int) -> JsonResponse:
    """Not a tool: a page the person may use in the browser, which the assistant was never given."""
    Effect.objects.create(owner=request.user, label=f"other:{pk}")
    return JsonResponse({"other": pk})


@tool(name="test_shadowed_note", method="POST",
      description="Test suite: record a note at an address a broader one shadows.")
@login_required
@require_POST
def shadowed_note(request: HttpRequest) -> JsonResponse:
    Effect.objects.create(owner=request.user, label="shadowed")
    return JsonResponse({"noted": True})


@login_required
@require_POST
def shadow_catch_all(request: HttpRequest, word: str) -> JsonResponse:
    """Not a tool: routed before the shadowed one and matching its address."""
    Effect.objects.create(owner=request.user, label=f"caught:{word}")
    return JsonResponse({"caught": word})


@tool(name="test_pair_note", method="POST",
      description="Test suite: record a note from two parts, each may hold slashes.")
@login_required
@require_POST
def pair_note(request: HttpRequest, left: str, right: str) -> JsonResponse:
    Effect.objects.create(owner=request.user, label=f"pair:{left}|{right}")
    return JsonResponse({"left": left, "right": right})


@tool(name="test_whoami", description="Say who is asking, from where, and what their session holds.")
@login_required
@require_GET
def whoami(request: HttpRequest) -> JsonResponse:
    return JsonResponse({
        "username": request.user.get_username(),
        "note": request.session.get("testapp_note"),
        "remote_addr": request.META.get("REMOTE_ADDR"),
        "protocol": request.META.get("SERVER_PROTOCOL"),
        "host": request.get_host(),
        "secure": request.is_secure(),
    })


@tool(name="test_csrf_seen", method="POST", description="Say what the site's CSRF check saw; changes nothing.")
@login_required
@require_POST
def csrf_seen(request: HttpRequest) -> JsonResponse:
    return JsonResponse({
        "exempted": bool(getattr(request, "_dont_enforce_csrf_checks", False)),
        "secret_present": bool(request.META.get("CSRF_COOKIE")),
        "origin": request.META.get("HTTP_ORIGIN"),
    })


@tool(name="test_async_effect", method="POST", description="Record an effect from an asynchronous view.")
@login_required
@require_POST
async def async_effect(request: HttpRequest, *, label: str) -> JsonResponse:
    user = await request.auser()
    await Effect.objects.acreate(owner=user, label=label)
    return JsonResponse({"recorded": label, "by": user.get_username()})


@tool(name="test_flash", method="POST", description="Record an effect and say so in a message, then redirect.")
@login_required
@require_POST
def flash(request: HttpRequest, *, label: str) -> HttpResponseRedirect:
    Effect.objects.create(owner=request.user, label=label)
    messages.success(request, f"Recorded {label}.")
    return HttpResponseRedirect("/")


# Views that answer with a page meant for a browser, which the assistant cannot read as data
# (tests/tools/test_tools_pages.py): a read and a write that render() a plain page, and class-based views
# that the tests declare as tools themselves, with and without fields=.
@tool(name="test_note_page", description="Test suite: show your notes, as a plain rendered page.")
@login_required
@require_GET
def note_page(request: HttpRequest) -> HttpResponse:
    return render(request, "testapp/notes.html", {"notes": Effect.objects.filter(owner=request.user)})


@tool(name="test_note_page_save", method="POST",
      description="Test suite: record a note, then show the notes page instead of redirecting.")
@login_required
@require_POST
def note_page_save(request: HttpRequest, *, label: str) -> HttpResponse:
    Effect.objects.create(owner=request.user, label=label)
    messages.success(request, f"Recorded {label}.")
    return render(request, "testapp/notes.html", {"notes": Effect.objects.filter(owner=request.user)})


class EffectDetailView(LoginRequiredMixin, DetailView):
    model = Effect
    template_name = "testapp/effect_detail.html"

    def get_queryset(self) -> QuerySet[Effect]:
        return Effect.objects.filter(owner=self.request.user)


class NotesView(LoginRequiredMixin, TemplateView):
    template_name = "testapp/notes.html"


class EffectListView(LoginRequiredMixin, ListView):
    template_name = "testapp/notes.html"
    paginate_by = 2

    def get_queryset(self) -> QuerySet[Effect]:
        return Effect.objects.filter(owner=self.request.user).order_by("pk")


@tool(name="test_problem_json", description="Test suite: answer with an RFC 9457 problem document.")
@login_required
@require_GET
def problem_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"title": "Out of stock", "status": 200}, content_type="application/problem+json")


# Approval cards in words (tests/tools/test_tools_describe.py, tests/security/test_approval_summary.py): an update
# that asks first, a tool that describes itself, and a delete view whose own lookup fails (after a write the
# lookup must not keep).
@tool(name="test_task_change", confirm=True, description="Test suite: change a task, after asking the person.")
class ConfirmedTaskUpdateView(TaskUpdateView):
    pass


def _describe_forgetting(request: HttpRequest, *, label: str) -> str:
    count = Effect.objects.filter(owner=request.user, label=label).count()
    Effect.objects.create(owner=request.user, label="written while describing")  # must not be kept
    return f"Forget your {count} records labelled “{label}”"


@tool(name="test_forget_effects", method="POST", confirm=True, describe=_describe_forgetting,
      description="Test suite: forget your records with a label, after asking the person.")
@login_required
@require_POST
def forget_effects(request: HttpRequest, *, label: str) -> JsonResponse:
    deleted, _ = Effect.objects.filter(owner=request.user, label=label).delete()
    return JsonResponse({"forgotten": deleted})


@tool(name="test_broken_delete", description="Test suite: delete a record through a view whose lookup fails.")
class BrokenLookupDeleteView(LoginRequiredMixin, DeleteView):
    model = Effect
    success_url = "/"

    def get_object(self, queryset: QuerySet[Effect] | None = None) -> Effect:
        Effect.objects.create(owner=self.request.user, label="written by a lookup")
        raise RuntimeError("the lookup broke")


@tool(name="test_staff_delete", description="Test suite: delete any record; the URLconf lets staff only in.")
class StaffOnlyDeleteView(LoginRequiredMixin, DeleteView):
    """Its staff check is the decorator its URL pattern wraps it in (see urls.py); its queryset is everyone's."""

    model = Effect
    success_url = "/"
