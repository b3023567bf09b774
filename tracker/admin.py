from __future__ import annotations

from django.contrib import admin

from tracker.models import Comment, Project, Task


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "archived", "created_at")
    list_filter = ("archived",)
    search_fields = ("name", "description", "owner__username")
    filter_horizontal = ("members",)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("title", "project", "status", "priority", "assignee", "due_date")
    list_filter = ("status", "priority")
    search_fields = ("title", "description")
    raw_id_fields = ("project", "assignee", "created_by")


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ("__str__", "task", "author", "created_at")
    raw_id_fields = ("task", "author")
