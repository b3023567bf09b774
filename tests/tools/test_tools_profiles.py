"""What is offered, what pauses, and what the registry and system checks say about declarations."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import override_settings
from django.urls import include, path

from assistant.tools import AlreadyRegistered, execute_tool, readable, register_temporarily, registry, tool, tools_for
from tracker.models import Comment, Project, Task

pytestmark = pytest.mark.django_db

READS = {"tracker_comment_list", "tracker_project_list", "tracker_project_stats", "tracker_task_detail",
         "tracker_task_list"}
# The tools tests/testapp installs for the run-loop and security tests.
SUITE_TOOLS = {definition.name for definition in registry.all()
               if getattr(definition, "view", None) is not None and definition.view.__module__.startswith("tests.")}


def nudge(request: HttpRequest) -> JsonResponse:
    """Send a reminder (not destructive, but asks first under the standard profile)."""
    return JsonResponse({"sent": True})


def unguarded(request: HttpRequest) -> HttpResponse:
    return HttpResponse(status=204)


urlpatterns = [
    path("tracker/", include("tracker.urls")),
    path("test-tools/", include("tests.testapp.urls")),  # the suite's own tools stay routed
    path("nudge/", nudge, name="nudge"),
    path("unguarded/", unguarded, name="unguarded"),
]


def _offered(user: Any, **kwargs: Any) -> dict[str, Any]:
    """The tools on offer, less the ones tests/testapp installs for the run-loop tests."""
    return {t.name: t for t in tools_for(user, **kwargs) if t.name not in SUITE_TOOLS}


def test_restricted_offers_reads_only_and_refuses_writes(alice: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")

    offered = _offered(alice, profile="restricted")

    assert set(offered) == READS
    assert all(t.kind == "read" and not t.confirm for t in offered.values())
    outcome = execute_tool(alice, "tracker_project_delete", {"pk": home.pk}, profile="restricted")
    assert outcome.status == "denied" and "read tools only" in outcome.reason
    assert Project.objects.filter(pk=home.pk).exists()


def test_standard_and_trusted_decide_what_pauses(alice: Any) -> None:
    standard = _offered(alice, profile="standard")
    trusted = _offered(alice, profile="trusted")

    assert set(standard) == set(trusted) and set(standard) > READS
    assert {n for n, t in standard.items() if t.confirm} == {"tracker_project_delete", "tracker_task_delete"}
    assert {n for n, t in trusted.items() if t.confirm} == {"tracker_project_delete", "tracker_task_delete"}
    assert standard["tracker_project_delete"].destructive and standard["tracker_project_delete"].kind == "write"
    assert not standard["tracker_task_create"].confirm and not standard["tracker_task_create"].destructive


@override_settings(ROOT_URLCONF=__name__)
def test_declared_confirm_pauses_under_standard_but_not_trusted(alice: Any) -> None:
    with register_temporarily():
        tool(name="test_nudge", confirm=True, method="POST", permission=lambda user: True)(nudge)
        assert _offered(alice, profile="standard")["test_nudge"].confirm is True
        assert _offered(alice, profile="trusted")["test_nudge"].confirm is False
        assert "test_nudge" not in _offered(alice, profile="restricted")
        # The executor itself never pauses: the run loop calls it once the user approved.
        assert execute_tool(alice, "test_nudge", {}).data == {"sent": True}


def test_the_default_profile_comes_from_settings(alice: Any, settings: Any) -> None:
    settings.ASSISTANT = {"PERMISSION_PROFILE": "restricted"}
    assert set(_offered(alice)) == READS


def test_a_spec_limits_the_tools_and_the_executor_checks_again(alice: Any, settings: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    settings.ASSISTANT = {"SPECS": {"reader": {"tools": ["tracker_task_list"], "permission_profile": "standard"}}}

    assert set(_offered(alice, spec="reader")) == {"tracker_task_list"}
    assert set(_offered(alice, spec={"tools": ["tracker_task_create"]})) == {"tracker_task_create"}
    outcome = execute_tool(alice, "tracker_task_create", {"project": home.pk, "title": "t"}, spec="reader")
    assert outcome.status == "denied" and not Task.objects.exists()
    with pytest.raises(ValueError, match="Unknown assistant spec"):
        tools_for(alice, spec="nonexistent")
    assert execute_tool(alice, "tracker_task_list", {}, spec="nonexistent").status == "error"


def test_a_permission_decides_whether_a_tool_is_offered(alice: Any, user_factory: Any) -> None:
    from django.contrib.auth.models import Permission

    with register_temporarily():
        readable(Comment, name="test_comment_admin_list", fields=["id", "body"],
                 scope=lambda user, qs: qs, permission="tracker.view_comment")
        assert "test_comment_admin_list" not in _offered(alice)
        assert execute_tool(alice, "test_comment_admin_list", {}).status == "denied"
        staff = user_factory()
        staff.user_permissions.add(Permission.objects.get(codename="view_comment"))
        staff = type(staff).objects.get(pk=staff.pk)  # permissions are cached per instance
        assert "test_comment_admin_list" in _offered(staff)


def test_duplicate_names_fail_loudly_and_temporary_ones_go_away() -> None:
    with pytest.raises(AlreadyRegistered, match="tracker_task_list"):
        readable(Task, name="tracker_task_list", fields=["id"], scope="for_user")
    with register_temporarily():
        readable(Task, name="test_tmp_tasks", fields=["id"], scope="for_user")
        assert "test_tmp_tasks" in registry
    assert "test_tmp_tasks" not in registry


# How each view tool's kind was inferred (I010, W013) is tested in tests/security/test_view_kinds.py.
KIND_CHECKS = {"assistant.I010", "assistant.W013"}
# The suite's own tools include a read and a write that answer with a plain page, on purpose: what the
# checks say about unreadable answers (W015, W016) is tested in tests/tools/test_tools_pages.py.
PAGE_CHECKS = {"assistant.W015", "assistant.W016"}
# Whether a worker swept in the last 30 s (W022), and whether it offers the tools this test declares (W026: it
# does not), depend on which tests ran just before; they have tests of their own (tests/edge/test_wiring.py,
# tests/operations/test_worker_tools.py).
WORKER_CHECKS = {"assistant.W022", "assistant.W026"}


def _check_ids() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in run_checks(include_deployment_checks=False):
        if message.id and message.id.startswith("assistant.") and message.id >= "assistant.E010" \
                and message.id not in KIND_CHECKS | PAGE_CHECKS | WORKER_CHECKS:
            found.setdefault(message.id, []).append(message.msg)
    return found


@override_settings(ROOT_URLCONF=__name__)
def test_system_checks_name_each_problem(alice: Any) -> None:
    assert _check_ids() == {}
    with register_temporarily():
        readable(Comment, name="test_unscoped", fields=["id", "body"])
        readable(Comment, name="test_bad_field", fields=["id", "nope"], scope=lambda user, qs: qs)
        readable(Comment, name="test_bad_scope", fields=["id"], scope="for_nobody")
        tool(name="test_unguarded", description="Writes without a login.", method="POST")(unguarded)
        tool(name="test no spaces", description="x")(nudge)

        def not_routed(request: HttpRequest) -> HttpResponse:
            return HttpResponse()

        tool(name="test_not_routed")(not_routed)

        def carded(request: HttpRequest) -> HttpResponse:
            return HttpResponse()

        tool(name="test_card_missing", description="Shows a card.", method="GET", card="nowhere/card.html")(carded)
        found = _check_ids()

        # A name with spaces is also one MCP cannot offer (the site installs assistant.mcp): W040.
        assert set(found) == {"assistant.W010", "assistant.E014", "assistant.W011", "assistant.E011",
                              "assistant.E010", "assistant.E012", "assistant.W040", "assistant.E017",
                              "assistant.E018"}
        assert found["assistant.E018"] == ["Tool 'test_card_missing' declares card='nowhere/card.html', which is not "
                                           "found by any template loader."]
        assert "'test_bad_scope' has scope='for_nobody', which is no method of" in found["assistant.E017"][0]
        assert "test no spaces" in found["assistant.W040"][0]
        assert "test_unscoped" in found["assistant.W010"][0]
        assert "test_unscoped" not in _offered(alice)  # default deny
        assert execute_tool(alice, "test_unscoped", {}).status == "denied"


def test_the_command_lists_what_a_user_would_be_offered(alice: Any) -> None:
    out = io.StringIO()
    call_command("assistant_tools", user="alice", profile="restricted", json=True, stdout=out)
    listed = json.loads(out.getvalue())
    # The site's reads, and the planning tool every run is offered beside them.
    assert {t["name"] for t in listed if t["name"] not in SUITE_TOOLS} == READS | {"assistant_plan"}
    assert all(t["parameters"]["additionalProperties"] is False for t in listed)

    text = io.StringIO()
    call_command("assistant_tools", stdout=text)
    assert "tracker_project_delete  (write, destructive, asks first)" in text.getvalue()
    assert "* title: string" in text.getvalue()
