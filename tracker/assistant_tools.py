"""The tracker's assistant tools. Its views declare themselves with `@tool` (importing them registers
them); reads of its models are declared here, each limited to what the user can see, and so is who writes
each model's text (every read, view tool and page context of the model uses it)."""

from __future__ import annotations

from assistant.tools import authored, readable
from tracker import views  # noqa: F401  (the @tool declarations on the views)
from tracker.models import Comment, Project, Task

# A project's name and description: only its owner may change them. A task's title and description: anyone in
# its project (its owner and members may all edit it). A comment: its author.
authored(Project, by="owner")
authored(Task, by=["project__owner", "project__members"])
authored(Comment, by="author")

readable(
    Project,
    name="tracker_project_list",
    fields=["id", "name", "description", "archived", "owner__username"],
    scope="for_user",
    search=["name", "description"],
    description="List the projects you own or are a member of (id, name, description, archived, owner). "
    "Search by name with search.",
)

readable(
    Task,
    name="tracker_task_list",
    fields=["id", "title", "status", "priority", "due_date", "project", "project__name", "assignee__username"],
    scope="for_user",
    search=["title", "description"],
    description="List tasks in your projects. Open tasks are those whose status is \"todo\" or \"doing\" "
    "(filter with status__in); find a task by title with search. Priority: 1 low, 2 normal, 3 high.",
)

readable(
    Comment,
    name="tracker_comment_list",
    fields=["id", "task", "task__title", "author__username", "body", "created_at"],
    scope=lambda user, comments: comments.filter(task__in=Task.objects.for_user(user)),
    search=["body"],
    description="List comments on tasks in your projects; filter by task id with task.",
)
