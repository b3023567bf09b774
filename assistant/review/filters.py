"""The admin's list filters, for staff reviewing chats, runs and plans (assistant/admin.py lists them).

The run list's filters take the plain field names as their parameters (`?status=failed`,
`?stop_reason=max_tool_calls`), so a link from elsewhere (the dashboard) shows as the chosen filter in the
sidebar. A value no filter offers is refused as a bad lookup, not answered with an empty list."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, time
from typing import Any, cast

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from assistant.channel_policies import channel_choices
from assistant.models import AgentPlan, AgentRun, AgentStep
from assistant.review.plans import plan_status


class ChannelFilter(admin.SimpleListFilter):
    """Where a chat or run was asked from (`?channel=`, as the dashboard links it): the person's panel, or a
    channel an installed app registers (assistant/channel_policies.py), in staff's words."""

    title = "channel"
    parameter_name = "channel"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return channel_choices()

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() is None:
            return queryset
        values = [value for value, _ in channel_choices()]
        if self.value() not in values:
            # Not "every row": a link that asks for a channel there is not is told so (StrictAdminQueryMixin).
            raise IncorrectLookupParameters(f"“{self.value()}” is not a channel ({', '.join(values)})")
        return queryset.filter(channel=self.value())


class _ExactValueFilter(admin.SimpleListFilter):
    """Runs whose field `parameter_name` is exactly the chosen value; the choices are the values present."""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        field = str(self.parameter_name)
        values = (model_admin.get_queryset(request).exclude(**{field: ""})
                  .order_by(field).values_list(field, flat=True).distinct())
        return [(value, value) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() is None:
            return queryset
        return queryset.filter(**{str(self.parameter_name): self.value()})


class StatusFilter(_ExactValueFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(AgentRun.Status.choices)


class StopReasonFilter(_ExactValueFilter):
    title = "stop reason"
    parameter_name = "stop_reason"


class SpecFilter(_ExactValueFilter):
    title = "spec"
    parameter_name = "spec"


class ErrorFilter(admin.SimpleListFilter):
    """Whether the run ended with an error. The column is blank, never null, for none: `error__isnull` (the
    name a link would use) means "no error" here, not "a NULL nobody ever writes"."""

    title = "error"
    parameter_name = "error__isnull"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("False", "Has an error"), ("True", "None")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() in ("True", "true", "1"):
            return queryset.filter(error="")
        if self.value() in ("False", "false", "0"):
            return queryset.exclude(error="")
        return queryset


class OthersTextFilter(admin.SimpleListFilter):
    """Runs that read text someone other than their person wrote (containment, docs/security.md), those of them
    that asked the person because of it, and runs that read only their person's own text and the site's."""

    title = "someone else's text"
    parameter_name = "others_text"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("read", "Read someone else's text"), ("asked", "Asked the person because of it"),
                ("none", "Only the person's own")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        value = self.value()
        if value is None:
            return queryset
        if value == "read":
            return queryset.exclude(others_text=[])
        if value == "asked":
            return queryset.filter(Exists(AgentStep.objects.filter(run=OuterRef("pk"), containment__isnull=False)))
        if value == "none":
            return queryset.filter(others_text=[])
        raise IncorrectLookupParameters(f"“{value}” is not a choice of someone else's text (read, asked, none)")


class TreeFilter(admin.SimpleListFilter):
    """Top runs (what a person's message started) or members' runs (work a run handed to a member)."""

    title = "place in its tree"
    parameter_name = "tree"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("top", "Top runs"), ("member", "Members' runs")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() is None:
            return queryset
        if self.value() not in ("top", "member"):
            # Not "every run": a link that asks for something else is told so (StrictAdminQueryMixin).
            raise IncorrectLookupParameters(f"“{self.value()}” is neither top nor member")
        return queryset.filter(parent__isnull=self.value() == "top")


def newest_plans() -> QuerySet[AgentPlan]:
    """The plan each run follows (its newest revision), for an `Exists` under a run (`OuterRef("pk")`): the
    revision whose statuses are final once the run has ended, as the dashboard counts its steps."""
    later = AgentPlan.objects.filter(run=OuterRef("run"), revision__gt=OuterRef("revision"))
    return AgentPlan.objects.filter(run=OuterRef("pk")).exclude(Exists(later))


class PlanFilter(admin.SimpleListFilter):
    """Runs that planned (assistant/plans/), did not, revised their plan, or whose plan has a step that failed;
    with `plan_member` (the dashboard's links), runs whose plan has a step for that member (that failed, with
    `plan=step_failed`: one and the same step). A step's status is read from the newest revision, where it is
    final once the run has ended."""

    title = "plan"
    parameter_name = "plan"
    member_parameter = "plan_member"

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any) -> None:
        members = params.pop(self.member_parameter, None)
        # An empty name is no member (a plan step for none says so with "").
        self.member: str | None = (str(members[-1]) or None) if members else None
        super().__init__(request, params, model, model_admin)
        if self.member is not None:
            self.used_parameters[self.member_parameter] = self.member

    def expected_parameters(self) -> list[str | None]:
        return [self.parameter_name, self.member_parameter]

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        if self.member:
            return [("yes", f"Planned, a step for {self.member}"),
                    ("revised", f"Revised, a step for {self.member}"),
                    ("step_failed", f"A step for {self.member} failed")]
        return [("yes", "Planned"), ("no", "Did not plan"), ("revised", "Revised its plan"),
                ("step_failed", "A step of its plan failed")]

    def choices(self, changelist: Any) -> Iterator[Any]:
        yield {"selected": self.value() is None and self.member is None,
               "query_string": changelist.get_query_string(remove=self.expected_parameters()), "display": "All"}
        if self.member:
            yield {"selected": self.value() is None,
                   "query_string": changelist.get_query_string(remove=[self.parameter_name]),
                   "display": f"A step for {self.member}"}
        for lookup, title in self.lookup_choices:
            yield {"selected": self.value() == lookup,
                   "query_string": changelist.get_query_string({self.parameter_name: lookup}), "display": title}

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        value = self.value()
        if value is None and self.member is None:
            return queryset
        if value not in (None, "yes", "no", "revised", "step_failed"):
            raise IncorrectLookupParameters(f"“{value}” is not a choice of plan (yes, no, revised, step_failed)")
        planned = AgentPlan.objects.filter(run=OuterRef("pk"))
        if value == "no":
            if self.member is not None:
                raise IncorrectLookupParameters("a run that did not plan has no step for a member")
            return queryset.exclude(Exists(planned))
        step: dict[str, str] = {}
        if self.member is not None:
            step["member"] = self.member
        if value == "step_failed":
            step["status"] = AgentPlan.Status.FAILED
        if value == "revised":
            queryset = queryset.filter(Exists(planned.filter(revision__gte=2)))
        if step:
            return queryset.filter(Exists(newest_plans().filter(steps__contains=[step])))
        return queryset if value == "revised" else queryset.filter(Exists(planned))


class FeedbackFilter(admin.SimpleListFilter):
    """The person's thumbs on the answer (`quality_score` 1.0 up, 0.0 down, null none)."""

    title = "feedback"
    parameter_name = "feedback"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("up", "Thumbs up"), ("down", "Thumbs down"), ("none", "None")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() == "up":
            return queryset.filter(quality_score__gte=0.5)
        if self.value() == "down":
            return queryset.filter(quality_score__lt=0.5)
        if self.value() == "none":
            return queryset.filter(quality_score__isnull=True)
        return queryset


class CreatedFilter(admin.DateFieldListFilter):
    """Django's date filter (`created_at__gte` / `created_at__lt`), also taking plain ISO dates
    (`?created_at__gte=2026-11-01`) as midnight in the site's time zone."""

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        for name, values in self.used_parameters.items():
            if name.endswith("__isnull"):
                continue
            try:
                self.used_parameters[name] = [_as_moment(value) for value in cast(list[Any], values)]
            except ValueError as error:
                raise IncorrectLookupParameters(error) from error
        return super().queryset(request, queryset)


def _as_moment(value: Any) -> Any:
    if isinstance(value, str) and len(value) == 10:
        return timezone.make_aware(datetime.combine(date.fromisoformat(value), time.min))
    return value


class PlanRevisionFilter(admin.SimpleListFilter):
    title = "revision"
    parameter_name = "revision"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("first", "First plans"), ("later", "Revisions")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentPlan]) -> QuerySet[AgentPlan]:
        if self.value() is None:
            return queryset
        if self.value() not in ("first", "later"):
            raise IncorrectLookupParameters(f"“{self.value()}” is neither first nor later")
        return queryset.filter(revision=1) if self.value() == "first" else queryset.filter(revision__gte=2)


class PlanStepStatusFilter(admin.SimpleListFilter):
    """Revisions with a step of this status (as it is in that revision)."""

    title = "a step that is"
    parameter_name = "step_status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(status, plan_status(status).words) for status in AgentPlan.Status.values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentPlan]) -> QuerySet[AgentPlan]:
        if self.value() is None:
            return queryset
        if self.value() not in AgentPlan.Status.values:
            raise IncorrectLookupParameters(f"“{self.value()}” is not a plan step's status")
        return queryset.filter(steps__contains=[{"status": self.value()}])
