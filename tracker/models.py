"""Projects, their tasks and the comments on them. A project is visible to its owner and members."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models, transaction
from django.db.models import Q
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.urls import reverse


class ProjectQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> ProjectQuerySet:
        """Projects the user owns or is a member of; none for anonymous users."""
        if user is None or not getattr(user, "is_authenticated", False):
            return self.none()
        member_of = Project.members.through.objects.filter(user=user).values("project_id")
        return self.filter(Q(owner=user) | Q(pk__in=member_of))


class Project(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="owned_projects")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="projects")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, max_length=2000)
    archived = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("tracker:project_detail", kwargs={"pk": self.pk})

    def is_owned_by(self, user: Any) -> bool:
        return self.owner_id == getattr(user, "pk", None)


class TaskQuerySet(models.QuerySet):
    def for_user(self, user: Any) -> TaskQuerySet:
        """Tasks in the projects the user can see."""
        return self.filter(project__in=Project.objects.for_user(user))

    def open(self) -> TaskQuerySet:
        return self.exclude(status=Task.Status.DONE)


class Task(models.Model):
    class Status(models.TextChoices):
        TODO = "todo", "To do"
        DOING = "doing", "In progress"
        DONE = "done", "Done"

    class Priority(models.IntegerChoices):
        LOW = 1, "Low"
        NORMAL = 2, "Normal"
        HIGH = 3, "High"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True, max_length=5000)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.TODO)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_tasks"
    )
    due_date = models.DateField(null=True, blank=True)
    estimate_hours = models.DecimalField(
        max_digits=5, decimal_places=1, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="Estimated effort in hours.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="created_tasks"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["due_date", "-priority", "id"]
        indexes = [models.Index(fields=["project", "status"], name="task_project_status")]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("tracker:task_detail", kwargs={"pk": self.pk})


class Comment(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="task_comments")
    body = models.TextField(max_length=5000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.body[:60]


def _task_file_path(attached: TaskFile, filename: str) -> str:
    # A folder of its own per file: two files of one name never meet, and the name is kept as given.
    return f"tracker/task-files/{uuid.uuid4().hex}/{filename}"


class TaskFile(models.Model):
    """A file attached to a task, on its page or by the assistant from a file the person attached to a message."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="files")
    file = models.FileField(upload_to=_task_file_path, max_length=300)
    name = models.CharField(max_length=200)
    content_type = models.CharField(max_length=100, blank=True)
    size = models.PositiveBigIntegerField()
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="task_files"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("tracker:task_file", kwargs={"pk": self.task_id, "file_id": self.pk})


@receiver(post_delete, sender=TaskFile)
def _remove_stored_file(sender: type[TaskFile], instance: TaskFile, **kwargs: Any) -> None:
    """A task's file goes with its row (its task deleted, or it alone), once that is committed."""
    if instance.file.name:
        storage, name = instance.file.storage, instance.file.name
        transaction.on_commit(lambda: storage.delete(name))
