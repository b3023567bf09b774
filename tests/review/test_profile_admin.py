"""Profiles as staff read them in the admin: the figures of a profile's stats, its trend, the summary line the
prompt gets, its tool usage, intents and window as tables — and no way to add, change or delete one."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from assistant.models import AgentChat, AgentRun
from registry.models import AgentProfile
from registry.selectors import profile_summary
from registry.services import profile_record_invocation
from tests.browser.harness import BROWSER_MARKS, axe_violations, describe_violations, screenshot

pytestmark = pytest.mark.django_db

SPEC = "general"
VOID_ELEMENTS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class AdminPage(HTMLParser):
    """What a person reads on an admin page: each `data-figure` element's text, each `data-table` table's rows
    (cell texts), and the links inside those rows."""

    def __init__(self, body: str) -> None:
        super().__init__(convert_charrefs=True)
        self.figures: dict[str, str] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self.row_links: dict[str, list[list[str]]] = {}
        self._figure_stack: list[tuple[str, int, list[str]]] = []  # (name, depth, text)
        self._depth = 0
        self._table: str | None = None
        self._cell: list[str] | None = None
        self.feed(body)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in VOID_ELEMENTS:
            return
        self._depth += 1
        if found.get("data-figure"):
            self._figure_stack.append((str(found["data-figure"]), self._depth, []))
        if tag == "table" and (found.get("data-table") or found.get("id")):
            self._table = str(found.get("data-table") or found["id"])
            self.tables[self._table] = []
            self.row_links[self._table] = []
        elif self._table and tag == "tr":
            self.tables[self._table].append([])
            self.row_links[self._table].append([])
        elif self._table and tag in {"td", "th"}:
            self._cell = []
        elif self._table and tag == "a" and found.get("href"):
            self.row_links[self._table][-1].append(str(found["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID_ELEMENTS:
            return
        if self._figure_stack and self._figure_stack[-1][1] == self._depth:
            name, _depth, text = self._figure_stack.pop()
            self.figures[name] = " ".join("".join(text).split())
        if self._table and tag in {"td", "th"} and self._cell is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        for _name, _depth, text in self._figure_stack:
            text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def rows(self, table: str) -> list[list[str]]:
        """The table's body rows (the header row dropped)."""
        return self.tables[table][1:]


def read(client: Client, url: str) -> AdminPage:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return AdminPage(response.content.decode())


@pytest.fixture
def reviewer(user_factory: Any) -> Client:
    """Staff with the view permission on profiles, and nothing else."""
    staff = user_factory("reviewer", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_agentprofile"))
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def superuser(user_factory: Any) -> Client:
    client = Client()
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    return client


def make_run(owner: Any) -> AgentRun:
    chat = AgentChat.objects.create(owner=owner)
    return AgentRun.objects.create(owner=owner, chat=chat, spec=SPEC, status="succeeded")


@pytest.fixture
def profile(alice: Any) -> AgentProfile:
    """Four invocations, oldest first, written the way the assistant writes them: the two older ones went
    badly (a failed tool call, a timeout), the two newer ones succeeded — an improving trend."""
    runs = [make_run(alice) for _ in range(4)]
    entries: list[dict[str, Any]] = [
        {"run_id": runs[0].pk, "status": "error", "duration_ms": 1000, "tool_calls": 2, "tool_errors": 1,
         "token_usage": 100, "intent": "create", "tools_used": ["search_tasks", "create_task"],
         "failed_tools": ["create_task"], "error_summary": "the form has errors"},
        {"run_id": runs[1].pk, "status": "timeout", "duration_ms": 3000, "tool_calls": 1, "tool_errors": 0,
         "token_usage": 300, "intent": "search", "tools_used": ["search_tasks"], "failed_tools": [],
         "error_summary": "took too long"},
        {"run_id": runs[2].pk, "status": "success", "duration_ms": 2000, "tool_calls": 1, "tool_errors": 0,
         "token_usage": 200, "intent": "search", "tools_used": ["search_tasks"], "failed_tools": [],
         "quality_score": 1.0},
        {"run_id": runs[3].pk, "status": "success", "duration_ms": 4000, "tool_calls": 1, "tool_errors": 0,
         "token_usage": 400, "intent": "search", "tools_used": ["create_task"], "failed_tools": [],
         "quality_score": 0.0},
    ]
    for entry in entries:
        profile_record_invocation(owner=alice, spec_name=SPEC, entry=entry)
    return AgentProfile.objects.get(owner=alice, spec_name=SPEC)


def change_url(profile: AgentProfile) -> str:
    return reverse("admin:registry_agentprofile_change", args=[profile.pk])


def test_a_profiles_page_shows_every_figure_of_its_stats_computed_from_its_window(
    reviewer: Client, profile: AgentProfile
) -> None:
    figures = read(reviewer, change_url(profile)).figures
    # By hand from the four entries: 2 of 4 succeeded; the newer half 2/2 against the older half 0/2.
    assert figures["invocations"] == "4"
    assert figures["sample_size"] == "4"
    assert figures["success_rate"] == "50%"
    assert figures["avg_duration"] == "2.5 s"  # (1000 + 3000 + 2000 + 4000) / 4 ms
    assert figures["avg_tool_calls"] == "1.25"  # 5 calls over 4 runs
    # A thumbs up and a thumbs down (entries without a source are the thumbs', the only source before the judge).
    assert figures["avg_quality"] == "0.50 (2 thumbs, 0 judged)"
    assert figures["error_rate"] == "25%"  # one run of four had a failing tool call
    assert figures["trend"] == "↑ +100%"
    assert figures["trend_meaning"] == (
        "Improving: the newer half of the window's success rate is 100 points above the older half's."
    )
    assert figures["top_tools"] == "search_tasks (3), create_task (2)"
    assert figures["top_intents"] == "search (3), create (1)"


def test_the_summary_line_on_the_page_is_exactly_what_goes_into_the_prompt(
    reviewer: Client, profile: AgentProfile, alice: Any
) -> None:
    line = profile_summary(owner=alice, spec_name=SPEC)
    assert line.startswith(f'Agent "{SPEC}" — 4 prior invocations, 50% success rate, ↑ 100% trend.')
    assert read(reviewer, change_url(profile)).figures["summary"] == line


def test_tool_usage_and_intents_are_tables_not_json(reviewer: Client, profile: AgentProfile) -> None:
    response = reviewer.get(change_url(profile))
    body = response.content.decode()
    page = AdminPage(body)
    # Most called first: search_tasks 3 calls, all fine; create_task 1 fine, 1 failed.
    assert page.rows("tool-usage") == [
        ["search_tasks", "3", "3", "0", "0%"],
        ["create_task", "2", "1", "1", "50%"],
    ]
    assert page.rows("intents") == [["search", "3", "75%"], ["create", "1", "25%"]]
    # The stored JSON itself is nowhere on the page.
    for raw in ("&quot;run_id&quot;", "&quot;success&quot;:", "&quot;tools_used&quot;", '"run_id"'):
        assert raw not in body


def test_the_window_is_rows_newest_first_each_run_linked_to_its_page(
    reviewer: Client, profile: AgentProfile
) -> None:
    page = read(reviewer, change_url(profile))
    rows = page.rows("window")
    statuses = [row[1] for row in rows]
    assert statuses == ["success", "success", "timeout", "error"]
    run_ids = [entry["run_id"] for entry in reversed(profile.window)]
    assert [row[2] for row in rows] == [f"#{run_id}" for run_id in run_ids]
    assert [links[0] for links in page.row_links["window"][1:]] == [
        reverse("admin:assistant_agentrun_change", args=[run_id]) for run_id in run_ids
    ]
    oldest = rows[-1]
    # Last, each run's cost: none of these had a price.
    assert oldest[3:] == ["1.0 s", "search_tasks, create_task (failed)", "100", "—", "the form has errors", "—"]
    assert rows[0][3:] == ["4.0 s", "create_task", "400", "0 (thumbs down)", "", "—"]
    assert rows[1][6] == "1 (thumbs up)"


def record_statuses(owner: Any, spec_name: str, statuses: str) -> AgentProfile:
    """One invocation per letter, oldest first: S success, E error."""
    for letter in statuses:
        profile_record_invocation(owner=owner, spec_name=spec_name, entry={
            "status": {"S": "success", "E": "error"}[letter], "duration_ms": 1000, "tool_calls": 0,
            "tool_errors": 0, "token_usage": 10, "tools_used": [], "failed_tools": [],
        })
    return AgentProfile.objects.get(owner=owner, spec_name=spec_name)


@pytest.mark.parametrize(("statuses", "arrow", "figure"), [
    ("SSEE", "↓", "↓ -100%"),
    ("ESES", "→", "→ 0%"),
    # Halves of 50: 25 then 26 successes, a rise of exactly the deadband (2 points).
    ("SE" * 25 + "S" * 26 + "E" * 24, None, "+2%"),
])
def test_the_pages_trend_arrow_is_the_one_in_the_summary_line(
    reviewer: Client, alice: Any, statuses: str, arrow: str | None, figure: str
) -> None:
    profile = record_statuses(alice, "trend", statuses)
    summary = profile_summary(owner=alice, spec_name="trend")
    in_summary = summary.split("success rate, ")[1][0]
    if arrow is not None:
        assert in_summary == arrow
    page = read(reviewer, change_url(profile))
    assert page.figures["trend"] == f"{in_summary} {figure.split()[-1]}"
    listing = read(reviewer, reverse("admin:registry_agentprofile_changelist"))
    assert listing.tables["result_list"][1][4] == in_summary


def test_the_list_shows_each_profiles_figures_and_the_organisation_for_a_profile_without_owner(
    reviewer: Client, profile: AgentProfile
) -> None:
    profile_record_invocation(owner=None, spec_name="support", entry={
        "run_id": 1, "status": "cancelled", "duration_ms": 500, "tool_calls": 0, "tool_errors": 0,
        "token_usage": 0, "tools_used": [], "failed_tools": [],
    })
    page = read(reviewer, reverse("admin:registry_agentprofile_changelist"))
    rows = {row[0]: row for row in page.tables["result_list"][1:]}
    assert rows["general"][1:6] == ["alice", "4", "50%", "↑", "2.5 s"]
    assert rows["general"][6]  # last seen
    assert rows["support"][1:6] == ["organisation", "1", "0%", "→", "0.5 s"]

    organisation = read(reviewer, reverse("admin:registry_agentprofile_changelist") + "?scope=organisation")
    assert [row[0] for row in organisation.tables["result_list"][1:]] == ["support"]
    people = read(reviewer, reverse("admin:registry_agentprofile_changelist") + "?scope=person")
    assert [row[0] for row in people.tables["result_list"][1:]] == ["general"]


@pytest.mark.parametrize("who", ["reviewer", "superuser"])
def test_nobody_can_add_change_or_delete_a_profile(
    who: str, request: pytest.FixtureRequest, profile: AgentProfile
) -> None:
    client: Client = request.getfixturevalue(who)
    listing = client.get(reverse("admin:registry_agentprofile_changelist")).content.decode()
    assert reverse("admin:registry_agentprofile_add") not in listing  # no "Add" button, nor in the sidebar
    assert "delete_selected" not in listing
    body = client.get(change_url(profile)).content.decode()
    for control in ('name="_save"', 'name="_continue"', 'name="_addanother"', "deletelink", "<textarea", "<select",
                    reverse("admin:registry_agentprofile_delete", args=[profile.pk])):
        assert control not in body, control
    assert "read-only" in body.lower()

    assert client.get(reverse("admin:registry_agentprofile_add")).status_code == 403
    assert client.post(reverse("admin:registry_agentprofile_add"), {"spec_name": "new"}).status_code == 403
    delete = reverse("admin:registry_agentprofile_delete", args=[profile.pk])
    assert client.get(delete).status_code == 403
    assert client.post(delete, {"post": "yes"}).status_code == 403
    changed = client.post(change_url(profile), {"spec_name": "renamed", "notes": "edited", "invocations": 0})
    assert changed.status_code == 403
    bulk = client.post(
        reverse("admin:registry_agentprofile_changelist"),
        {"action": "delete_selected", "_selected_action": [profile.pk], "post": "yes"},
    )
    assert bulk.status_code in {200, 302}  # the admin answers "no action selected"; nothing is removed
    profile.refresh_from_db()
    assert (profile.spec_name, profile.notes, profile.invocations) == (SPEC, "", 4)
    assert AgentProfile.objects.filter(pk=profile.pk).exists()
    assert AgentProfile.objects.count() == 1


def test_staff_without_the_view_permission_do_not_see_profiles(user_factory: Any, profile: AgentProfile) -> None:
    client = Client()
    client.force_login(user_factory("helper", is_staff=True))
    assert client.get(change_url(profile)).status_code == 403
    assert client.get(reverse("admin:registry_agentprofile_changelist")).status_code == 403


def test_an_empty_profile_says_it_has_no_history_and_no_summary(reviewer: Client, alice: Any) -> None:
    empty = AgentProfile.objects.create(owner=alice, spec_name="idle")
    page = read(reviewer, change_url(empty))
    assert page.figures["summary"] == ""
    assert page.rows("window") == [["No invocations recorded yet."]]
    assert page.figures["trend"] == "→ 0%"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@BROWSER_MARKS[2]
def test_screenshot_of_a_profile_page(page: Any, site_url: str, user_factory: Any, profile: AgentProfile) -> None:
    user_factory("root", is_staff=True, is_superuser=True)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(site_url + "/admin/login/?next=" + change_url(profile))
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("[data-figure=summary]")
    assert page.inner_text("[data-figure=summary]") == profile_summary(owner=profile.owner, spec_name=SPEC)
    screenshot(page, "admin-profile", full_page=True)
    violations = axe_violations(page, "#content-main")
    assert not violations, describe_violations(violations)
    page.goto(site_url + reverse("admin:registry_agentprofile_changelist"))
    screenshot(page, "admin-profiles")
