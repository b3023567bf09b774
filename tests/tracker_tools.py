"""The tracker demo's tools as the model adapters see them: specs shaped like the ones the tool registry
derives from Django forms and read registrations, for the adapters' tests and benchmarks."""

from __future__ import annotations

from assistant.llm import Tool


def _schema(properties: dict[str, dict[str, object]], required: list[str]) -> dict[str, object]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TASK_LIST = Tool(
    "tracker_task_list",
    "List the tasks you can see. Filter by status, project or a search string; order and limit the rows.",
    _schema(
        {
            "status": {"type": "string", "description": "Task status.", "enum": ["open", "done"]},
            "project": {"type": "integer", "description": "ID of a project."},
            "search": {"type": "string", "description": "Text to look for in the title and description."},
            "ordering": {
                "type": "string",
                "enum": ["title", "-title", "due_date", "-due_date", "created_at"],
                "description": "Sort order.",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "At most this many rows."},
        },
        [],
    ),
)
PROJECT_LIST = Tool(
    "tracker_project_list",
    "List the projects you are a member of. Filter by a search string; order and limit the rows.",
    _schema(
        {
            "search": {"type": "string", "description": "Text to look for in the name."},
            "ordering": {"type": "string", "enum": ["name", "-name"], "description": "Sort order."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "At most this many rows."},
        },
        [],
    ),
)
TASK_CREATE = Tool(
    "tracker_task_create",
    "Create a task in one of your projects.",
    _schema(
        {
            "project": {"type": "integer", "description": "Project (the ID of a project)."},
            "title": {"type": "string", "description": "Title", "maxLength": 200},
            "description": {"type": "string", "description": "Description"},
            "priority": {"type": "string", "enum": ["low", "normal", "high"], "description": "Priority"},
            "due_date": {"type": "string", "format": "date", "description": "Due date"},
        },
        ["project", "title"],
    ),
)
TASK_COMPLETE = Tool(
    "tracker_task_complete",
    "Mark a task as done.",
    _schema({"task_id": {"type": "integer", "description": "The ID of the task."}}, ["task_id"]),
)
PROJECT_DELETE = Tool(
    "tracker_project_delete",
    "Delete a project and all of its tasks. Destructive: asks for confirmation.",
    _schema({"pk": {"type": "integer", "description": "The ID of the project."}}, ["pk"]),
)

TRACKER_TOOLS = [TASK_LIST, PROJECT_LIST, TASK_CREATE, TASK_COMPLETE, PROJECT_DELETE]
