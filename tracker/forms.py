"""Forms of the tracker. The assistant's tool schemas are derived from these, labels and help included."""

from __future__ import annotations

import csv
import datetime
import io
import os
from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import Q

from assistant.infra.text import readable_text
from tracker.models import Comment, Project, Task


class ProjectChoiceField(forms.ModelChoiceField):
    """A project given by id or by its exact name (any case), among the projects offered."""

    assistant_schema = {
        "type": ["integer", "string"],
        "description": "The project: its id, or its exact name (e.g. \"Home\").",
    }

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str):
            # Django's own refusal of NUL, as its text fields give it: PostgreSQL cannot look a name up by it.
            ProhibitNullCharactersValidator()(value)
        if isinstance(value, str) and value.strip() and not value.strip().isdigit():
            projects: Any = self.queryset
            matches = list(projects.filter(name__iexact=value.strip())[:2])
            if len(matches) == 1:
                return matches[0]
            raise forms.ValidationError(
                "No single project of yours has that name." if not matches else "Several projects have that name; "
                "give its id.", code="invalid_choice",
            )
        return super().to_python(value)


def _people_of(projects: Any) -> Any:
    """Users who own or are members of any of these projects: the possible assignees."""
    return get_user_model().objects.filter(
        Q(owned_projects__in=projects) | Q(projects__in=projects)
    ).distinct().order_by("username")


class _AssigneeMixin:
    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()  # type: ignore[misc]
        project = cleaned.get("project") or getattr(self.instance, "project", None)  # type: ignore[attr-defined]
        assignee = cleaned.get("assignee")
        if project is not None and assignee is not None and not (
            project.owner_id == assignee.pk or project.members.filter(pk=assignee.pk).exists()
        ):
            self.add_error("assignee", "The assignee must be the project's owner or one of its members.")  # type: ignore[attr-defined]
        return cleaned


def _readable(form: forms.BaseForm, name: str, *, multiline: bool = False) -> str:
    """The field's text as others will read it (see assistant/infra/text.py): names and text people type are
    read by the project's members and by staff, and named in the assistant's approval cards. A required
    field left with nothing visible gets the error an empty one gets."""
    text = readable_text(form.cleaned_data.get(name) or "", multiline=multiline)
    field = form.fields[name]
    if field.required and not text:
        raise forms.ValidationError(field.error_messages["required"], code="required")
    return text


class _ReadableTextMixin:
    """Names (`name`, `title`) and text (`description`, `body`) as `_readable` keeps them."""

    def clean_name(self) -> str:
        return _readable(cast(forms.BaseForm, self), "name")

    def clean_title(self) -> str:
        return _readable(cast(forms.BaseForm, self), "title")

    def clean_description(self) -> str:
        return _readable(cast(forms.BaseForm, self), "description", multiline=True)

    def clean_body(self) -> str:
        return _readable(cast(forms.BaseForm, self), "body", multiline=True)


class ProjectForm(_ReadableTextMixin, forms.ModelForm):
    class Meta:
        model = Project
        fields = ["name", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}


class ProjectArchiveForm(forms.Form):
    archived = forms.BooleanField(
        required=False, label="Archived", help_text="True to archive the project, false to bring it back."
    )


class TaskForm(_ReadableTextMixin, _AssigneeMixin, forms.ModelForm):
    """A new task: in one of the user's active projects."""

    project = ProjectChoiceField(queryset=Project.objects.none(), label="Project")

    class Meta:
        model = Task
        fields = ["project", "title", "description", "priority", "assignee", "due_date", "estimate_hours"]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "due_date": forms.DateInput(attrs={"type": "date"}),
        }
        help_texts = {"due_date": "The day it is due (YYYY-MM-DD)."}

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        projects = Project.objects.for_user(user).filter(archived=False)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = projects
        cast(forms.ModelChoiceField, self.fields["assignee"]).queryset = _people_of(projects)


class TaskUpdateForm(_ReadableTextMixin, _AssigneeMixin, forms.ModelForm):
    class Meta:
        model = Task
        fields = ["title", "description", "status", "priority", "assignee", "due_date", "estimate_hours"]
        widgets = TaskForm.Meta.widgets
        help_texts = TaskForm.Meta.help_texts

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        people = _people_of(Project.objects.filter(pk=self.instance.project_id))
        cast(forms.ModelChoiceField, self.fields["assignee"]).queryset = people


class CommentForm(_ReadableTextMixin, forms.ModelForm):
    class Meta:
        model = Comment
        fields = ["body"]
        labels = {"body": "Comment"}
        widgets = {"body": forms.Textarea(attrs={"rows": 2})}


#: The largest file a task takes (as large as the assistant's attachments may be by default).
TASK_FILE_MAX_BYTES = 10 * 1024 * 1024


class TaskFileForm(forms.Form):
    """A file for a task: any type, up to TASK_FILE_MAX_BYTES, kept under its own name."""

    file = forms.FileField(label="File", help_text="Any file up to 10 MB.")

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        if upload.size > TASK_FILE_MAX_BYTES:
            raise forms.ValidationError(f"The file is {upload.size / 1_048_576:.1f} MB; a task takes files of up "
                                        "to 10 MB.")
        name = readable_text(os.path.basename(upload.name or ""), max_chars=200)
        if not name:
            raise forms.ValidationError("The file has no name.")
        upload.name = name
        return upload


# At most this many rows in one import: a spreadsheet of a project's tasks, not a database dump.
IMPORT_ROWS_MAX = 200
IMPORT_PRIORITIES = {"low": Task.Priority.LOW, "normal": Task.Priority.NORMAL, "high": Task.Priority.HIGH,
                     "1": Task.Priority.LOW, "2": Task.Priority.NORMAL, "3": Task.Priority.HIGH, "": None}


class TaskImportForm(forms.Form):
    """Tasks from a CSV file: a header row naming its columns (`title`, and optionally `priority`, `due_date`,
    `description`), then one task per row. Every row is checked before any task is made: one bad row refuses the
    file, saying which row and why."""

    file = forms.FileField(
        label="CSV file",
        help_text="A header row with a title column; priority (low, normal, high), due_date (YYYY-MM-DD) and "
                  "description are optional. One task per row.",
    )

    def clean_file(self) -> list[dict[str, Any]]:
        upload = self.cleaned_data["file"]
        try:
            text = upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError("The file is not text in UTF-8: save it as a CSV (UTF-8).") from None
        rows = list(csv.DictReader(io.StringIO(text)))
        header = {(name or "").strip().lower() for name in (rows[0].keys() if rows else [])}
        if "title" not in header:
            raise forms.ValidationError("The first row must name the columns, one of them “title”.")
        if not rows:
            raise forms.ValidationError("The file has no tasks: one task per row under the header.")
        if len(rows) > IMPORT_ROWS_MAX:
            raise forms.ValidationError(f"At most {IMPORT_ROWS_MAX} tasks at once; this file has {len(rows)}.")
        tasks, problems = [], []
        for number, row in enumerate(rows, start=2):
            values = {(key or "").strip().lower(): (value or "").strip() for key, value in row.items()
                      if isinstance(value, str)}
            task, problem = self._task(values)
            if problem:
                problems.append(f"row {number}: {problem}")
            else:
                tasks.append(task)
        if problems:
            raise forms.ValidationError("; ".join(problems[:5]) + ("; …" if len(problems) > 5 else ""))
        return tasks

    @staticmethod
    def _task(values: dict[str, str]) -> tuple[dict[str, Any], str]:
        title = readable_text(values.get("title", ""))
        if not title:
            return {}, "no title"
        if len(title) > 200:
            return {}, "the title is longer than 200 characters"
        priority = IMPORT_PRIORITIES.get(values.get("priority", "").lower(), "unknown")
        if priority == "unknown":
            return {}, f"priority “{values['priority']}” is not low, normal or high"
        due = values.get("due_date", "")
        try:
            due_date = datetime.date.fromisoformat(due) if due else None
        except ValueError:
            return {}, f"due_date “{due}” is not a date (YYYY-MM-DD)"
        task: dict[str, Any] = {"title": title, "due_date": due_date,
                                "description": values.get("description", "")[:5000]}
        if priority is not None:
            task["priority"] = priority
        return task, ""
