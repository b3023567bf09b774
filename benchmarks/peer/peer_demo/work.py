"""The bare work of the three tools, the same as the project's benchmark turn asks of its tracker: create a
task, list tasks by a search, count a project's tasks by status. Called directly, this is the baseline."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.utils import timezone

from .models import Project, Task


def task_create(user: Any, *, project: int, title: str) -> dict[str, Any]:
    home = Project.objects.get(pk=project, owner=user)
    task = Task.objects.create(project=home, title=title)
    return {"id": task.pk, "title": task.title, "status": task.status, "project": home.pk}


def task_list(user: Any, *, search: str) -> list[dict[str, Any]]:
    tasks = Task.objects.filter(project__owner=user, title__icontains=search).exclude(status=Task.Status.DONE)
    return list(tasks.order_by("-created_at").values("id", "title", "status", "project_id")[:50])


def project_stats(user: Any, *, pk: int) -> dict[str, Any]:
    home = Project.objects.get(pk=pk, owner=user)
    counts = dict(home.tasks.values_list("status").annotate(n=Count("id")).order_by())
    overdue = home.tasks.exclude(status=Task.Status.DONE).filter(due_date__lt=timezone.localdate()).count()
    return {"project": home.name, "by_status": {s: counts.get(s, 0) for s in Task.Status.values}, "overdue": overdue}
