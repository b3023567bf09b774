"""The tracker's pages, built the ordinary Django way. Several are also assistant tools (`@tool`):
the assistant fires exactly these views as the signed-in user, so the same scoping applies to it."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import Count, Q, QuerySet
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase, HttpResponseRedirectBase
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST
from django.views.generic import CreateView, DeleteView, DetailView, FormView, ListView, UpdateView
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from assistant.tools import shows, tool
from tracker.forms import (
    CommentForm,
    ProjectArchiveForm,
    ProjectForm,
    TaskFileForm,
    TaskForm,
    TaskImportForm,
    TaskUpdateForm,
)
from tracker.models import Project, Task, TaskFile, TaskQuerySet


def _visible_projects(request: HttpRequest) -> QuerySet[Project]:
    return Project.objects.for_user(request.user)


def _visible_tasks(request: HttpRequest) -> TaskQuerySet:
    return Task.objects.for_user(request.user).select_related("project", "assignee")


class _HtmxRequest(HttpRequest):
    htmx: HtmxDetails


def _htmx(request: HttpRequest) -> HtmxDetails:
    """django-htmx's HtmxMiddleware (in the site's settings) sets `request.htmx` on every request."""
    return cast(_HtmxRequest, request).htmx


class _KeepsUpMixin:
    """A page with a region that keeps up with the assistant. The region (`region_template`, which the
    page includes) re-fetches the page's own address when the panel raises `assistant:changed`; htmx
    sends that request with `HX-Request: true`, and the answer is then the region alone, for the same
    person with the same filters and page. Place before LoginRequiredMixin."""

    region_template: str
    request: HttpRequest

    def get_template_names(self) -> list[str]:
        if _htmx(self.request):
            return [self.region_template]
        return super().get_template_names()  # type: ignore[misc]

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        if _htmx(request) and not request.user.is_authenticated and isinstance(response, HttpResponseRedirectBase):
            # Signed out meanwhile: the whole page goes to the login page, rather than its form into the region.
            return HttpResponseClientRedirect(response["Location"])
        # The page and its region share one address: a cache (the browser's own, for the back button) must
        # not hand out one for the other.
        patch_vary_headers(response, ["HX-Request"])
        return response


class ProjectListView(_KeepsUpMixin, LoginRequiredMixin, ListView):
    template_name = "tracker/project_list.html"
    region_template = "tracker/_projects.html"
    context_object_name = "projects"

    def get_queryset(self) -> QuerySet[Project]:
        archived = self.request.GET.get("archived") == "1"
        # An aggregate drops Meta.ordering, so the order is stated: by name, as people look for them.
        return _visible_projects(self.request).filter(archived=archived).select_related("owner").annotate(
            open_tasks=Count("tasks", filter=~Q(tasks__status=Task.Status.DONE)),
        ).order_by("name", "pk")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(showing_archived=self.request.GET.get("archived") == "1", **kwargs)


@tool(name="tracker_project_create", description="Create a new project owned by you.", card="tracker/project_card.html")
class ProjectCreateView(LoginRequiredMixin, CreateView):
    form_class = ProjectForm
    template_name = "tracker/project_form.html"

    def form_valid(self, form: Any) -> HttpResponse:
        form.instance.owner = self.request.user
        response = super().form_valid(form)
        messages.success(self.request, f"Project “{form.instance.name}” created.")
        return response


# Its queryset is the person's own (get_queryset), so it names no model: @shows tells the assistant which
# object its page shows, for "archive this" asked here.
@shows(Project)
class ProjectDetailView(_KeepsUpMixin, LoginRequiredMixin, DetailView):
    template_name = "tracker/project_detail.html"
    region_template = "tracker/_project.html"
    context_object_name = "project"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().get(request, *args, **kwargs)
        except Http404:
            if not _htmx(request):
                raise
            # The project went away while its page was open (the assistant deleted it, its owner stopped
            # sharing it): the region says so instead of showing it as it was. htmx does not swap a 404 in.
            return TemplateResponse(request, "tracker/_project_gone.html")

    def get_queryset(self) -> QuerySet[Project]:
        return _visible_projects(self.request).select_related("owner").prefetch_related("members")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        tasks = self.object.tasks.select_related("assignee")
        return super().get_context_data(
            open_tasks=tasks.exclude(status=Task.Status.DONE), done_tasks=tasks.filter(status=Task.Status.DONE),
            is_owner=self.object.is_owned_by(self.request.user), **kwargs,
        )


class _OwnerOnlyMixin:
    """The project must be visible (else 404, as for a project that does not exist) and owned."""

    request: HttpRequest

    def get_queryset(self) -> QuerySet[Project]:
        return _visible_projects(self.request)

    def get_object(self, queryset: Any = None) -> Project:
        project: Project = super().get_object(queryset)  # type: ignore[misc]
        if not project.is_owned_by(self.request.user):
            raise PermissionDenied("Only the project's owner may do this.")
        return project


@tool(name="tracker_project_update", description="Rename a project you own or change its description.",
      card="tracker/project_card.html")
class ProjectUpdateView(LoginRequiredMixin, _OwnerOnlyMixin, UpdateView):
    model = Project
    form_class = ProjectForm
    template_name = "tracker/project_form.html"

    def form_valid(self, form: Any) -> HttpResponse:
        messages.success(self.request, f"Project “{form.instance.name}” saved.")
        return super().form_valid(form)


@tool(
    name="tracker_project_delete",
    confirm=True,
    description="Delete a project you own, with all its tasks and comments. Needs the project's id "
    "(find it with tracker_project_list). Asks the user first.",
)
class ProjectDeleteView(LoginRequiredMixin, _OwnerOnlyMixin, DeleteView):
    model = Project
    template_name = "tracker/project_confirm_delete.html"
    success_url = reverse_lazy("tracker:project_list")
    context_object_name = "project"

    def form_valid(self, form: Any) -> HttpResponse:
        name = self.object.name
        response = super().form_valid(form)
        messages.success(self.request, f"Project “{name}” deleted.")
        return response


@shows(Project)
@tool(
    name="tracker_project_archive",
    suggest="Archive this project",
    form=ProjectArchiveForm,
    descriptions={"pk": "Id of the project."},
    description="Archive a project you own (archived=true) or bring it back (archived=false).",
)
@login_required
@require_POST
def project_archive(request: HttpRequest, pk: int) -> HttpResponse:
    project = get_object_or_404(_visible_projects(request), pk=pk)
    if not project.is_owned_by(request.user):
        raise PermissionDenied("Only the project's owner may archive it.")
    form = ProjectArchiveForm(request.POST)
    if not form.is_valid():
        return TemplateResponse(request, "tracker/project_detail.html", {"project": project, "form": form})
    project.archived = form.cleaned_data["archived"]
    project.save(update_fields=["archived"])
    verb = "archived" if project.archived else "restored"
    messages.success(request, f"Project “{project.name}” {verb}.")
    return redirect(project)


@shows(Project)
@tool(
    name="tracker_project_stats",
    suggest="Show this project's stats",
    descriptions={"pk": "Id of the project."},
    description="Counts of a project's tasks by status (to do, in progress, done) and how many are overdue.",
)
@login_required
@require_GET
def project_stats(request: HttpRequest, pk: int) -> JsonResponse:
    project = get_object_or_404(_visible_projects(request), pk=pk)
    counts = dict(project.tasks.values_list("status").annotate(n=Count("id")).order_by())
    overdue = project.tasks.open().filter(due_date__lt=timezone.localdate()).count()
    return JsonResponse({
        "project": project.name,
        "by_status": {status: counts.get(status, 0) for status in Task.Status.values},
        "overdue": overdue,
    })


class TaskListView(_KeepsUpMixin, LoginRequiredMixin, ListView):
    template_name = "tracker/task_list.html"
    region_template = "tracker/_tasks.html"
    context_object_name = "tasks"
    paginate_by = 50

    def paginate_queryset(self, queryset: Any, page_size: int) -> tuple[Paginator, Page, Any, bool]:
        # A page past the end (the list shrank while it was open) shows the last page, not a 404 that
        # would leave the region as it was.
        paginator = self.get_paginator(queryset, page_size, allow_empty_first_page=True)
        page = paginator.get_page(self.request.GET.get(self.page_kwarg))
        return paginator, page, page.object_list, page.has_other_pages()

    def get_queryset(self) -> TaskQuerySet:
        tasks = _visible_tasks(self.request)
        status = self.request.GET.get("status", "open")
        if status == "open":
            return tasks.open()
        if status in Task.Status.values:
            return tasks.filter(status=status)
        return tasks

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(
            status=self.request.GET.get("status", "open"), statuses=Task.Status.choices, **kwargs
        )


@tool(
    name="tracker_task_create",
    card="tracker/task_card.html",
    description="Create a task in one of your projects. Give the project by id or by exact name "
    "(e.g. \"Home\") and a title; the rest is optional.",
)
class TaskCreateView(LoginRequiredMixin, CreateView):
    form_class = TaskForm
    template_name = "tracker/task_form.html"

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "user": self.request.user}

    def get_initial(self) -> dict[str, Any]:
        return {"project": self.request.GET.get("project")}

    def form_valid(self, form: Any) -> HttpResponse:
        form.instance.created_by = self.request.user
        response = super().form_valid(form)
        messages.success(self.request, f"Task “{form.instance.title}” added to {form.instance.project.name}.")
        return response


@tool(
    name="tracker_tasks_import",
    description="Add tasks to one of your active projects from a CSV file (one task per row: a title, and "
    "optionally priority, due_date and description). Give the project's id and the id of the CSV file the "
    "person attached to their message.",
    descriptions={"pk": "Id of the project."},
)
class TaskImportView(LoginRequiredMixin, FormView):
    """Tasks from a CSV file, on the project's page ("Import tasks"): every row checked by the form first."""

    form_class = TaskImportForm
    template_name = "tracker/task_import.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated:
            self.project = get_object_or_404(
                Project.objects.for_user(request.user).filter(archived=False), pk=kwargs["pk"])
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(project=self.project, **kwargs)

    def form_valid(self, form: TaskImportForm) -> HttpResponse:
        rows = form.cleaned_data["file"]
        person = cast(Any, self.request.user)  # signed in: LoginRequiredMixin
        Task.objects.bulk_create([Task(project=self.project, created_by=person, **row) for row in rows])
        count = len(rows)
        upload = form.files.get("file")
        messages.success(self.request, f"{count} task{'' if count == 1 else 's'} added to {self.project.name} "
                                       f"from {getattr(upload, 'name', 'the file')}.")
        return redirect(self.project)


@tool(
    name="tracker_task_detail",
    card="tracker/task_card.html",
    fields=["id", "title", "description", "status", "priority", "due_date", "estimate_hours",
            "project", "project__name", "assignee__username", "completed_at"],
    description="One task's details, by its id.",
)
class TaskDetailView(LoginRequiredMixin, DetailView):
    model = Task
    template_name = "tracker/task_detail.html"
    context_object_name = "task"

    def get_queryset(self) -> QuerySet[Task]:
        return _visible_tasks(self.request)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("comment_form", CommentForm())
        kwargs.setdefault("file_form", TaskFileForm())
        return super().get_context_data(comments=self.object.comments.select_related("author"),
                                        files=self.object.files.select_related("uploaded_by"), **kwargs)


@tool(
    name="tracker_task_update",
    card="tracker/task_card.html",
    description="Change a task's title, description, status, priority, assignee, due date or estimate. "
    "Needs the task's id; fields you leave out keep their current values.",
)
class TaskUpdateView(LoginRequiredMixin, UpdateView):
    model = Task
    form_class = TaskUpdateForm
    template_name = "tracker/task_form.html"

    def get_queryset(self) -> QuerySet[Task]:
        return _visible_tasks(self.request)

    def form_valid(self, form: Any) -> HttpResponse:
        if form.instance.status == Task.Status.DONE and form.instance.completed_at is None:
            form.instance.completed_at = timezone.now()
        elif form.instance.status != Task.Status.DONE:
            form.instance.completed_at = None
        messages.success(self.request, f"Task “{form.instance.title}” saved.")
        return super().form_valid(form)


@shows(Task)
@tool(
    name="tracker_task_complete",
    card="tracker/task_card.html",
    suggest="Mark this task done",
    method="POST",
    descriptions={"pk": "Id of the task."},
    description="Mark a task as done. Needs the task's id (find it with tracker_task_list, searching by title).",
)
@login_required
@require_POST
def task_complete(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(_visible_tasks(request), pk=pk)
    if task.status == Task.Status.DONE:
        messages.info(request, f"Task “{task.title}” was already done.")
    else:
        task.status = Task.Status.DONE
        task.completed_at = timezone.now()
        task.save(update_fields=["status", "completed_at", "updated_at"])
        messages.success(request, f"Task “{task.title}” marked done.")
    return redirect(task)


@tool(
    name="tracker_task_delete",
    confirm=True,
    description="Delete a task, by its id. Asks the user first.",
)
class TaskDeleteView(LoginRequiredMixin, DeleteView):
    model = Task
    template_name = "tracker/task_confirm_delete.html"
    context_object_name = "task"

    def get_queryset(self) -> QuerySet[Task]:
        return _visible_tasks(self.request)

    def get_success_url(self) -> str:
        return reverse("tracker:project_detail", kwargs={"pk": self.object.project_id})

    def form_valid(self, form: Any) -> HttpResponse:
        title = self.object.title
        response = super().form_valid(form)
        messages.success(self.request, f"Task “{title}” deleted.")
        return response


@tool(
    name="tracker_comment_create",
    form=CommentForm,
    descriptions={"pk": "Id of the task to comment on."},
    description="Add a comment to a task, by the task's id.",
)
@login_required
@require_POST
def comment_create(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(_visible_tasks(request), pk=pk)
    form = CommentForm(request.POST)
    if not form.is_valid():
        context = {"task": task, "object": task, "comment_form": form, "form": form,
                   "comments": task.comments.select_related("author")}
        return TemplateResponse(request, "tracker/task_detail.html", context, status=200)
    form.instance.task = task
    form.instance.author = request.user
    form.save()
    messages.success(request, "Comment added.")
    return redirect(task)


@tool(
    name="tracker_task_attach",
    form=TaskFileForm,
    card="tracker/task_card.html",
    descriptions={"pk": "Id of the task.", "file": "Id of the file the person attached to their message."},
    description="Attach a file to a task, by the task's id: a file the person attached to their message (its id), "
    "kept with the task for everyone in its project.",
)
@login_required
@require_POST
def task_attach(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(_visible_tasks(request), pk=pk)
    form = TaskFileForm(request.POST, request.FILES)
    if not form.is_valid():
        context = {"task": task, "object": task, "comment_form": CommentForm(), "file_form": form, "form": form,
                   "comments": task.comments.select_related("author"),
                   "files": task.files.select_related("uploaded_by")}
        return TemplateResponse(request, "tracker/task_detail.html", context, status=200)
    upload = form.cleaned_data["file"]
    person = cast(Any, request.user)  # signed in: login_required
    TaskFile.objects.create(task=task, file=upload, name=upload.name, size=upload.size,
                            content_type=(upload.content_type or "")[:100], uploaded_by=person)
    messages.success(request, f"“{upload.name}” attached to the task “{task.title}”.")
    return redirect(task)


# Pictures open in the browser; anything else is downloaded, never shown as a page of the site.
_INLINE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


@login_required
@require_GET
def task_file(request: HttpRequest, pk: int, file_id: int) -> FileResponse:
    """A task's file, to whoever may see the task (anyone else: 404, as for the task itself)."""
    task = get_object_or_404(_visible_tasks(request), pk=pk)
    attached = get_object_or_404(TaskFile, task=task, pk=file_id)
    inline = attached.content_type in _INLINE_TYPES
    response = FileResponse(attached.file.open("rb"), as_attachment=not inline, filename=attached.name,
                            content_type=attached.content_type if inline else "application/octet-stream")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response
