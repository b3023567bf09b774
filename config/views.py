from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from tracker.models import Project, Task


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in person's projects and their open tasks, nearest due first."""
    context = {
        "projects": Project.objects.for_user(request.user).filter(archived=False),
        "open_tasks": Task.objects.for_user(request.user).open().select_related("project", "assignee")[:10],
    }
    # The projects and tasks keep up with the assistant: an htmx request (see templates/_home.html) gets them alone.
    response = render(request, "_home.html" if request.htmx else "home.html", context)  # type: ignore[attr-defined]
    patch_vary_headers(response, ["HX-Request"])
    return response
