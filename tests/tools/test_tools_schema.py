"""Tool schemas are derived from forms, URL converters and typed parameters, never hand-written."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any, Literal

import pytest
from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.test import override_settings
from django.urls import include, path

from assistant.tools import execute_tool, register_temporarily, tool, tools_for
from assistant.tools.schema import form_schema

pytestmark = pytest.mark.django_db


class EveryField(forms.Form):
    name = forms.CharField(max_length=30, min_length=2, label="Full name", help_text="As on the passport.")
    notes = forms.CharField(widget=forms.Textarea, required=False)
    email = forms.EmailField()
    seats = forms.IntegerField(min_value=1, max_value=9)
    budget = forms.DecimalField(min_value=decimal.Decimal("0"), max_value=decimal.Decimal("999.99"),
                                decimal_places=2)
    ratio = forms.FloatField(required=False)
    agree = forms.BooleanField(required=False)
    maybe = forms.NullBooleanField()
    size = forms.ChoiceField(choices=[("s", "Small"), ("m", "Medium")])
    level = forms.TypedChoiceField(choices=[(1, "One"), (2, "Two")], coerce=int)
    tags = forms.MultipleChoiceField(choices=[("a", "a"), ("b", "b")], required=False)
    day = forms.DateField()
    at = forms.DateTimeField(required=False)
    owner = forms.ModelChoiceField(queryset=get_user_model().objects.all())
    helpers = forms.ModelMultipleChoiceField(queryset=get_user_model().objects.all(), required=False)
    ref = forms.UUIDField(required=False)
    attachment = forms.FileField(required=False)
    count = forms.IntegerField(initial=3)


def test_every_common_form_field_type_has_a_json_schema() -> None:
    derived = form_schema(EveryField)
    p = derived.properties

    assert p["name"] == {"type": "string", "maxLength": 30, "minLength": 2,
                         "description": "Full name. As on the passport."}
    assert p["notes"]["type"] == ["string", "null"] and "maxLength" not in p["notes"]
    assert p["email"]["format"] == "email"
    assert (p["seats"]["type"], p["seats"]["minimum"], p["seats"]["maximum"]) == ("integer", 1, 9)
    assert (p["budget"]["type"], p["budget"]["minimum"], p["budget"]["maximum"]) == ("number", 0, 999.99)
    assert "2 decimal places" in p["budget"]["description"]
    assert p["ratio"]["type"] == ["number", "null"]
    assert p["agree"]["type"] == "boolean"
    assert p["maybe"]["type"] == ["boolean", "null"]
    assert p["size"]["enum"] == ["s", "m"] and "s = Small" in p["size"]["description"]
    assert (p["level"]["type"], p["level"]["enum"]) == ("integer", [1, 2])
    assert p["tags"] == {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "uniqueItems": True,
                         "description": "Tags."}
    assert (p["day"]["type"], p["day"]["format"]) == ("string", "date")
    assert p["at"]["format"] == "date-time"
    assert p["owner"]["type"] == "integer" and "Id of a user" in p["owner"]["description"]
    assert p["helpers"]["items"] == {"type": "integer"}
    assert p["ref"]["format"] == "uuid"
    assert p["count"]["default"] == 3
    # A file is one of the person's attachments, by id (the call hands it to the view as an upload).
    assert p["attachment"]["type"] == ["integer", "null"] and p["attachment"]["format"] == "assistant-attachment"
    assert "Id of a file the person attached" in p["attachment"]["description"] and derived.unsupported == []
    assert derived.required == ["name", "email", "seats", "budget", "maybe", "size", "level", "day", "owner"]
    assert derived.as_json_schema()["additionalProperties"] is False


def test_partial_forms_require_nothing() -> None:
    assert form_schema(EveryField, partial=True).required == []


# A URLconf for the tests below: converters, namespaces, typed keyword parameters.
def booking(request: HttpRequest, code: str, seat: int, *, when: datetime.date, kind: Literal["a", "b"] = "a",
            guests: list[int] | None = None) -> JsonResponse:
    """Look up a booking."""
    return JsonResponse({"code": code, "seat": seat, "when": when.isoformat(), "kind": kind, "guests": guests,
                         "user": request.user.get_username()})


def by_slug(request: HttpRequest, slug: str, ref: uuid.UUID, rest: str) -> JsonResponse:
    """Slug, uuid and path converters."""
    return JsonResponse({"slug": slug, "ref": str(ref), "rest": rest})


def crashing(request: HttpRequest) -> JsonResponse:
    """Always fails."""
    get_user_model().objects.create_user(username="written-before-the-crash")
    raise RuntimeError("boom " + "x" * 500)


urlpatterns = [
    path("b/<str:code>/<int:seat>/", login_required(booking), name="booking"),
    path("inner/", include(([path("s/<slug:slug>/<uuid:ref>/<path:rest>", by_slug, name="by_slug")], "inner"))),
    path("crash/", crashing, name="crash"),
    path("unnamed/", crashing),
]


@override_settings(ROOT_URLCONF=__name__)
def test_url_kwargs_and_typed_parameters_make_the_schema_and_are_passed_through(alice: Any) -> None:
    with register_temporarily():
        # Plain function views: only a declaration makes them reads.
        tool(name="test_booking", method="GET")(booking)
        tool(name="test_by_slug", method="GET")(by_slug)
        offered = {t.name: t for t in tools_for(alice)}
        schema = offered["test_booking"].parameters
        slug_schema = offered["test_by_slug"].parameters["properties"]

        assert offered["test_booking"].description == "Look up a booking."
        assert schema["required"] == ["code", "seat", "when"]
        assert schema["properties"]["seat"]["type"] == "integer"
        assert schema["properties"]["code"]["pattern"] == "^[^/]+$"
        assert schema["properties"]["when"]["format"] == "date"
        assert schema["properties"]["kind"]["enum"] == ["a", "b"]
        assert schema["properties"]["guests"]["type"] == ["array", "null"]
        assert (slug_schema["slug"]["pattern"], slug_schema["ref"]["format"]) == ("^[-a-zA-Z0-9_]+$", "uuid")

        outcome = execute_tool(alice, "test_booking", {"code": "XY", "seat": 4, "when": "2030-05-06",
                                                       "guests": [1, 2]})
        assert outcome.status == "data"
        assert outcome.data == {"code": "XY", "seat": 4, "when": "2030-05-06", "kind": "a", "guests": [1, 2],
                                "user": "alice"}
        ref = str(uuid.uuid4())
        nested = execute_tool(alice, "test_by_slug", {"slug": "a-b", "ref": ref, "rest": "x/y"})
        assert nested.data == {"slug": "a-b", "ref": ref, "rest": "x/y"}
        assert execute_tool(alice, "test_by_slug", {"slug": "a b", "ref": ref, "rest": "x"}).status == "invalid"
        assert execute_tool(alice, "test_booking", {"code": "a/b", "seat": 1, "when": "2030-01-01"}).status == \
            "invalid"


@override_settings(ROOT_URLCONF=__name__)
def test_a_crashing_view_is_a_short_error_and_its_writes_are_undone(alice: Any) -> None:
    with register_temporarily():
        tool(name="test_crash", method="POST")(crashing)
        outcome = execute_tool(alice, "test_crash", {})

    assert outcome.status == "error" and not outcome.took_effect
    assert outcome.reason.startswith("the view failed (RuntimeError: boom") and len(outcome.reason) < 260
    assert not get_user_model().objects.filter(username="written-before-the-crash").exists()


def test_tracker_task_create_takes_the_project_by_id_or_name(alice: Any) -> None:
    schema = next(t for t in tools_for(alice) if t.name == "tracker_task_create").parameters

    assert schema["required"] == ["project", "title"]
    assert schema["properties"]["project"]["type"] == ["integer", "string"]
    assert schema["properties"]["priority"] == {"type": "integer", "enum": [1, 2, 3], "default": 2,
                                                "description": "Priority. One of: 1 = Low, 2 = Normal, 3 = High."}
    assert schema["properties"]["title"]["maxLength"] == 200
    update = next(t for t in tools_for(alice) if t.name == "tracker_task_update").parameters
    assert update["required"] == ["pk"] and "default" not in update["properties"]["priority"]
