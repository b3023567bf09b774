"""Whatever a person puts in a page's address or form never makes the site answer 500: every query
parameter, form field and URL id of every page a person can open (the pages come from the site's URL
configuration, so a new page is not forgotten), and the staff dashboard's parameters, answered with a
message the person can read or an empty result.

The odd values are what can reach a page over HTTP: NUL (PostgreSQL text cannot hold it), bytes that are
not UTF-8 (Django decodes them as U+FFFD; so a lone surrogate cannot arrive this way, only its UTF-8-like
bytes can), numbers and dates past every range, negative numbers, and values of 20 to 50 KB. Each request
runs in a savepoint that is rolled back, so that a delete does not leave the next value nothing to reach,
and one request that breaks the transaction cannot make the next ones fail.

Before, each of these answered 500: `/assistant/memories/?q=%00`, and a project named by NUL on the task
form (PostgreSQL text cannot contain NUL); the dashboard's `?to=9999-12-31`, `?to=0001-01-01` and
`?from=9999-12-25&to=9999-12-31` (date value out of range); forgetting a memory from a page numbered with
20,000 digits (int() refuses past 4,300); `/healthz`, with a token configured, for an Authorization header
that was not ASCII, and for every Bearer header when the token itself was not ASCII.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlencode

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse
from django.utils import timezone

from assistant.attachments.store import attachment_store
from assistant.mcp.tokens import token_create
from assistant.models import AgentAttachment, AgentChat, AgentMemory, AgentRun
from tests.conftest import assistant_settings_with
from tracker.models import Comment, Project, Task, TaskFile

pytestmark = pytest.mark.django_db

# Each odd value as it travels: already percent-encoded, so that bytes which are not UTF-8 can be sent.
ODD_VALUES: dict[str, str] = {
    "NUL": "%00",
    "NUL inside text": "milk%00bread",
    "bytes that are not UTF-8": "%FF%FE%FD",
    "overlong UTF-8": "%C0%AF",
    "the UTF-8 form of a lone surrogate": "%ED%A0%80",
    "past U+10FFFF": "%F4%90%80%80",
    "a cut-off character": "%E2%82",
    "a broken escape": "%zz%",
    "a bidi override": quote("\u202egnp.exe"),
    "only a zero-width space": quote("\u200b"),
    "empty": "",
    "spaces": "+++",
    "zero": "0",
    "negative": "-1",
    "negative and huge": "-" + "9" * 30,
    "past bigint": str(2**63),
    "huge": "9" * 30,
    "1e400": "1e400",
    "NaN": "NaN",
    "the last day": "9999-12-31",
    "the first day": "0001-01-01",
    "year 10000": "10000-01-01",
    "year zero": "0000-01-01",
    "not a day": "2026-02-30",
    "50 KB of text": "x" * 50_000,
    "20 KB of digits": "9" * 20_000,
    "30 KB of multibyte text": quote("€" * 10_000),
}
# Ids in a page's own address (`<int:pk>`): the converter lets only digits through.
ODD_IDS = {"zero": "0", "past bigint": str(2**63), "past 2^64": str(2**64), "huge": "9" * 30}


@dataclass
class Inputs:
    """What one page takes. `get`/`post`: the query parameters and form fields it reads (a view's
    `form_class` adds its form's fields to `post` by itself); `valid`: a form that would pass, so that each
    odd value is tried in an otherwise good form; `queries`: whole query strings worth trying together;
    `as_`: who opens it ("person", "staff" or "anyone", signed out)."""

    get: tuple[str, ...] = ()
    post: tuple[str, ...] | None = None  # None: the page takes no POST
    valid: Callable[[World], dict[str, str]] = lambda world: {}
    queries: tuple[str, ...] = ()
    as_: str = "person"
    signs_out: bool = False  # the page ends the session it is asked in
    # How a valid POST answers: a redirect, except where the answer itself is the result (a new token is
    # shown on the one response that made it).
    passes_with: int = 302


@dataclass
class World:
    person: Any
    staff: Any
    project: Project
    task: Task
    memory: AgentMemory
    attachment: AgentAttachment
    token: Any
    task_file: TaskFile


def _task_form(world: World) -> dict[str, str]:
    return {"project": str(world.project.pk), "title": "Buy milk", "description": "", "priority": "2",
            "assignee": str(world.person.pk), "due_date": "2026-12-24", "estimate_hours": "1.5"}


def _task_update_form(world: World) -> dict[str, str]:
    form = _task_form(world)
    del form["project"]
    return {**form, "status": "doing"}


# Every page of the site, by URL name (see `site_pages`), with what it takes.
PAGES: dict[str, Inputs] = {
    "home": Inputs(),
    "healthz": Inputs(as_="anyone"),
    "login": Inputs(get=("next",), post=("username", "password", "next"), as_="anyone",
                    valid=lambda world: {"username": "alice", "password": "wrong"}),
    "logout": Inputs(post=("next",), signs_out=True),
    "admin:assistant_agentrun_dashboard": Inputs(
        get=("from", "to", "spec"), as_="staff",
        queries=("from=9999-12-25&to=9999-12-31", "from=0001-01-01&to=0001-01-05", "from=0001-01-01&to=9999-12-31",
                 "from=9999-12-31&to=0001-01-01"),
    ),
    "assistant:page": Inputs(),
    "assistant:memories": Inputs(get=("q", "page"), queries=("q=%00&page=2", "q=milk&page=" + "9" * 30)),
    "assistant:memory_delete": Inputs(post=("q", "page")),
    "assistant:memories_clear": Inputs(post=()),
    # A file comes as a multipart upload, which odd form values are not: each is answered "no_file".
    "assistant:attachments": Inputs(post=(), passes_with=400),
    "assistant:attachment": Inputs(),
    "assistant:healthz": Inputs(as_="anyone"),
    # Dictation is off in the suite's settings, so it answers 404 to each of these; tests/voice/test_transcribe.py
    # sends it odd forms with a transcription model configured.
    "assistant:transcribe": Inputs(post=("audio",), valid=lambda world: {"audio": "x"}, passes_with=404),
    "assistant:tokens": Inputs(post=("name", "spec", "read_only", "expires"),
                               valid=lambda world: {"name": "My agent", "spec": "default", "expires": "30d"},
                               passes_with=200),
    "assistant:token_revoke": Inputs(post=()),
    # The MCP endpoint takes only an access token: a browser's session, and any form, get 401.
    "assistant:mcp": Inputs(post=(), valid=lambda world: {"jsonrpc": "2.0"}, passes_with=401),
    # The AG-UI endpoint takes a RunAgentInput as JSON: a form, and anything else a form carries, gets 415
    # (tests/agui/test_agui_endpoint.py posts it JSON, fuzzed, through daphne).
    "assistant:ag-ui": Inputs(post=(), valid=lambda world: {"threadId": "t"}, passes_with=415),
    # The OAuth authorization server for hosted agents: its consent page (signed in), and the endpoints an
    # app calls signed out. With no app registered, a well-formed request is refused in words (400, or 401
    # invalid_client where the endpoint names the client).
    "django_mcpz_oauth:authorize": Inputs(
        get=("client_id", "redirect_uri", "response_type", "code_challenge", "code_challenge_method", "resource",
             "scope", "state"),
        post=("decision", "assistant_spec", "assistant_read_only"),
        valid=lambda world: {"decision": "allow", "assistant_spec": "default"}, passes_with=400),
    "django_mcpz_oauth:token": Inputs(
        post=("grant_type", "code", "redirect_uri", "code_verifier", "client_id", "refresh_token", "resource"),
        valid=lambda world: {"grant_type": "authorization_code", "client_id": "nobody"}, as_="anyone",
        passes_with=401),  # an unknown client: invalid_client
    "django_mcpz_oauth:register": Inputs(post=("client_name", "redirect_uris"), as_="anyone",
                                         valid=lambda world: {"client_name": "x"}, passes_with=400),
    "django_mcpz_oauth:revoke": Inputs(post=("token", "token_type_hint", "client_id"), as_="anyone",
                                       valid=lambda world: {"token": "nothing", "client_id": "nobody"},
                                       passes_with=401),
    "oauth_authorization_server": Inputs(as_="anyone"),
    "oauth_authorization_server_at": Inputs(as_="anyone"),
    "oauth_protected_resource": Inputs(as_="anyone"),
    "oauth_protected_resource_at": Inputs(as_="anyone"),
    "tracker:project_list": Inputs(get=("archived",)),
    "tracker:project_create": Inputs(post=(), valid=lambda world: {"name": "Garden", "description": ""}),
    "tracker:project_detail": Inputs(),
    "tracker:project_update": Inputs(post=(), valid=lambda world: {"name": "Home", "description": ""}),
    "tracker:project_archive": Inputs(post=("archived",), valid=lambda world: {"archived": "on"}),
    "tracker:project_delete": Inputs(post=()),
    "tracker:project_stats": Inputs(),
    "tracker:task_list": Inputs(get=("status", "page")),
    "tracker:task_create": Inputs(get=("project",), post=(), valid=_task_form),
    "tracker:task_detail": Inputs(),
    "tracker:task_update": Inputs(post=(), valid=_task_update_form),
    "tracker:task_complete": Inputs(post=()),
    "tracker:task_delete": Inputs(post=()),
    "tracker:comment_create": Inputs(post=("body",), valid=lambda world: {"body": "Done it."}),
    # Without a file, the import form asks for one (the page again, with the form's error).
    "tracker:project_import": Inputs(post=(), passes_with=200),
    # Likewise a task's file form (its page again); a task's file is served to those who see the task.
    "tracker:task_attach": Inputs(post=("file",), passes_with=200),
    "tracker:task_file": Inputs(),
}


@dataclass(frozen=True)
class Page:
    view: Callable[..., Any]
    ids: tuple[str, ...]  # the names of the ids in its address


def site_pages() -> dict[str, Page]:
    """Every page in the site's URL configuration, by name; of the Django admin only the dashboard,
    which is the assistant's (the admin's own pages are staff's, and tested with the admin)."""
    pages: dict[str, Page] = {}

    def walk(patterns: list[Any], namespace: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                if entry.app_name == "admin":
                    continue
                walk(entry.url_patterns, f"{namespace}{entry.namespace}:" if entry.namespace else namespace)
            else:
                assert entry.name, f"the page {entry.pattern} has no name: name it, and list it in PAGES"
                pages[namespace + entry.name] = Page(entry.callback, tuple(getattr(entry.pattern, "converters", ())))

    walk(get_resolver("config.urls").url_patterns, "")
    dashboard = get_resolver().resolve(reverse("admin:assistant_agentrun_dashboard"))
    pages["admin:assistant_agentrun_dashboard"] = Page(dashboard.func, ())
    return pages


def test_every_page_of_the_site_is_fuzzed() -> None:
    """A page added to the site without its inputs listed in PAGES fails here, rather than going untried."""
    assert set(site_pages()) == set(PAGES)


@pytest.fixture
def world(user_factory: Callable[..., Any]) -> World:
    person = user_factory("alice")
    staff = user_factory("staff", is_staff=True, is_superuser=True)
    project = Project.objects.create(owner=person, name="Home")
    task = Task.objects.create(project=project, title="Buy milk", created_by=person)
    Comment.objects.create(task=task, author=person, body="On it.")
    memory = AgentMemory.objects.create(owner=person, spec="default", content="Likes oat milk.",
                                        embedding=[0.1, 0.2, 0.3], embedder="t")
    chat = AgentChat.objects.create(owner=person, title="Milk")
    AgentRun.objects.create(owner=person, chat=chat, status="succeeded", duration_ms=10)
    token = token_create(owner=person, name="Laptop", spec="default", read_only=False, expires_in=None).token
    attachment = attachment_store(user=person, upload=SimpleUploadedFile("notes.txt", b"milk, bread"))
    task_file = TaskFile.objects.create(task=task, file=SimpleUploadedFile("quote.txt", b"20 EUR"), name="quote.txt",
                                        size=6, content_type="text/plain", uploaded_by=person)
    return World(person=person, staff=staff, project=project, task=task, memory=memory, token=token,
                 attachment=attachment, task_file=task_file)


def _kwargs(name: str, page: Page, world: World) -> dict[str, Any]:
    """The ids in the page's address: the person's own task, project, memory or attachment."""
    on_a_task = name.split(":")[-1].startswith(("task_", "comment_"))
    ids = {"memory_id": world.memory.pk, "token_id": world.token.pk, "attachment_id": world.attachment.pk,
           "file_id": world.task_file.pk,
           "pk": world.task.pk if on_a_task else world.project.pk,
           # The discovery documents of the OAuth issuer and of the MCP endpoint, under their own paths.
           "issuer_path": "oauth", "resource_path": "assistant/mcp/"}
    return {key: ids[key] for key in page.ids}


def _form_fields(page: Page) -> tuple[str, ...]:
    form_class = getattr(getattr(page.view, "view_class", None), "form_class", None)
    return tuple(form_class.base_fields) if form_class is not None else ()


class Visitor:
    """One browser asking a page, as one person (or signed out), noting each answer that was not one."""

    def __init__(self, world: World, inputs: Inputs) -> None:
        self.inputs = inputs
        self.client = Client(raise_request_exception=False)
        self.user = {"person": world.person, "staff": world.staff, "anyone": None}[inputs.as_]
        self.failures: list[str] = []
        if self.user is not None:
            self.client.force_login(self.user)

    def ask(self, method: str, path: str, *, what: str, query: str = "", body: bytes | str = b"",
            content_type: str = "application/x-www-form-urlencoded", **headers: str) -> Any:
        url = f"{path}?{query}" if query else path
        with transaction.atomic():
            if method == "GET":
                response = self.client.get(url, headers=headers)
            else:
                response = self.client.post(url, data=body, content_type=content_type, headers=headers)
            transaction.set_rollback(True)
        if response.status_code >= 500 and not (path.endswith("/healthz") and response.status_code == 503):
            # (/healthz answers 503 when a part is down, as it is here without a worker: that is its answer.)
            exc_info = getattr(response, "exc_info", None)  # the test client's record of what the view raised
            error = exc_info[1] if exc_info else None
            self.failures.append(f"{method} {path} {what}: {response.status_code} {type(error).__name__}: "
                                 f"{str(error)[:200]}")
        elif self.user is not None and not self.inputs.signs_out and response.wsgi_request.user != self.user:
            self.failures.append(f"{method} {path} {what}: not signed in as {self.user}, so the value never "
                                 f"reached the page")
        if self.inputs.signs_out and self.user is not None:
            self.client.force_login(self.user)
        return response


def _form(fields: dict[str, str], parameter: str = "", value: str = "") -> str:
    """A urlencoded form of `fields`, with `parameter` set to `value` (already percent-encoded) when given."""
    rest = urlencode({key: item for key, item in fields.items() if key != parameter})
    return "&".join(filter(None, [rest, f"{quote(parameter)}={value}" if parameter else ""]))


BOUNDARY = "fuzz-boundary"


def _multipart(fields: dict[str, str], parameter: str, value: bytes) -> bytes:
    """The same form as a browser's multipart/form-data, `parameter`'s value as raw bytes."""
    parts = [(key, item.encode()) for key, item in fields.items() if key != parameter] + [(parameter, value)]
    body = b"".join(f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'.encode() + data + b"\r\n"
                    for key, data in parts)
    return body + f"--{BOUNDARY}--\r\n".encode()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_no_input_of_a_page_makes_it_answer_500(world: World, name: str) -> None:
    """Each odd value in each parameter the page reads (in its address, twice over, and for a region that
    keeps up, as htmx asks for it), in each field of its form (urlencoded, and as multipart bytes), in an
    unknown parameter, and as each id in its address: never a 500, and always as the signed-in person."""
    inputs = PAGES[name]
    page = site_pages()[name]
    kwargs = _kwargs(name, page, world)
    path = reverse(name, kwargs=kwargs)
    visitor = Visitor(world, inputs)
    methods = ["GET"] if inputs.post is None else ["GET", "POST"]
    posted = () if inputs.post is None else (*inputs.post, *_form_fields(page))
    valid = inputs.valid(world)

    for method in methods:
        response = visitor.ask(method, path, body=_form(valid), what="as it is")
        if method == "POST" and valid and name != "login":  # (the login form's password is wrong on purpose)
            # The odd values below are each tried in a form that otherwise passes, so they reach the view's
            # own work, not only the form's first refusal.
            assert response.status_code == inputs.passes_with, f"the valid form of {name} did not pass"
    for parameter in inputs.get:
        for label, value in ODD_VALUES.items():
            visitor.ask("GET", path, query=f"{quote(parameter)}={value}", what=f"?{parameter}= {label}")
            visitor.ask("GET", path, query=f"{quote(parameter)}={value}", what=f"?{parameter}= {label}, by htmx",
                        HX_Request="true")
            # Django reads the last of several.
            visitor.ask("GET", path, query=f"{parameter}=1&{parameter}={value}", what=f"?{parameter}= 1 then {label}")
    for query in inputs.queries:
        visitor.ask("GET", path, query=query, what=f"?{query[:60]}")
    for parameter in posted:
        for label, value in ODD_VALUES.items():
            visitor.ask("POST", path, body=_form(valid, parameter, value), what=f"{parameter}= {label}")
            visitor.ask("POST", path, body=_multipart(valid, parameter, unquote_to_bytes(value)),
                        content_type=f"multipart/form-data; boundary={BOUNDARY}",
                        what=f"{parameter}= {label}, as multipart")
    visitor.ask("GET", path, query="unknown=%00%FF" + "x" * 10_000, what="an unknown parameter")
    for key in kwargs:
        for label, value in ODD_IDS.items():
            for method in methods:
                visitor.ask(method, reverse(name, kwargs={**kwargs, key: int(value)}), body=_form(valid),
                            what=f"<{key}> {label}")

    assert not visitor.failures, "\n".join(["", *visitor.failures])


# --- what the person reads where a page answered 500 before ----------------------------------------------


def _flashed(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.mark.parametrize("query", ["%00", "milk%00", "%00" * 100])
def test_a_memory_search_with_nul_finds_nothing_and_says_why(world: World, query: str) -> None:
    client = Client()
    client.force_login(world.person)
    response = client.get(f"/assistant/memories/?q={query}")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Likes oat milk." not in html  # no memory can contain NUL, so none matches
    assert "Searches cannot contain the NUL character, so no memory matches this one." in html
    assert "\x00" not in html  # the search box shows U+FFFD where the NUL was


def _shown_range(html: str) -> tuple[str, str]:
    found = re.search(r'aria-label="Figures for (\S+) to (\S+)"', html)
    assert found, "the dashboard shows no range"
    return found[1], found[2]


@pytest.mark.parametrize(("query", "message"), [
    ("?to=9999-12-31", "“9999-12-31” is past the last day the dashboard shows (9999-12-30): showing the last 14 days."),
    ("?from=9999-12-25&to=9999-12-31",
     "“9999-12-31” is past the last day the dashboard shows (9999-12-30): showing the last 14 days."),
    ("?from=9999-12-31&to=9999-12-31",
     "“9999-12-31” is past the last day the dashboard shows (9999-12-30); “9999-12-31” is past the last day the "
     "dashboard shows (9999-12-30): showing the last 14 days."),
])
def test_a_day_past_the_calendars_last_but_one_is_said_and_the_default_shown(
    world: World, query: str, message: str
) -> None:
    client = Client()
    client.force_login(world.staff)
    response = client.get("/admin/assistant/agentrun/dashboard/" + query)
    assert response.status_code == 200
    assert _flashed(response) == [message]
    today = timezone.localdate()
    assert _shown_range(response.content.decode()) == (
        (today - datetime.timedelta(days=13)).isoformat(), today.isoformat())


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"])
@pytest.mark.parametrize(("query", "shown"), [
    ("?to=0001-01-01", ("0001-01-01", "0001-01-01")),  # the 14 days up to it, as many as the calendar has
    ("?to=0001-01-05", ("0001-01-01", "0001-01-05")),
    ("?to=0001-01-14", ("0001-01-01", "0001-01-14")),
    ("?from=0001-01-01&to=0001-01-03", ("0001-01-01", "0001-01-03")),
    ("?from=9999-12-24&to=9999-12-30", ("9999-12-24", "9999-12-30")),
    ("?to=9999-12-30", ("9999-12-17", "9999-12-30")),
])
def test_the_calendars_first_and_last_days_are_shown_in_any_time_zone(
    world: World, settings: Any, zone: str, query: str, shown: tuple[str, str]
) -> None:
    """At the calendar's ends, in a zone 14 hours ahead of UTC and one 11 hours behind, whose midnights
    fall outside the calendar in UTC."""
    settings.TIME_ZONE = zone
    client = Client()
    client.force_login(world.staff)
    response = client.get("/admin/assistant/agentrun/dashboard/" + query)
    assert response.status_code == 200
    assert _flashed(response) == []
    assert _shown_range(response.content.decode()) == shown


@pytest.fixture
def health_token() -> Iterator[str]:
    token = "health-tökén-for-tests"
    with assistant_settings_with(HEALTH_TOKEN=token):
        yield token


def _header(text: str) -> str:
    """`text` as a server hands a header to Django: its UTF-8 bytes decoded as Latin-1."""
    return text.encode("utf-8").decode("latin-1")


@pytest.mark.parametrize("header", ["Bearer é", "Bearer €", "Bearer " + "ÿ" * 20_000, "é", "Bearer \x00",
                                    "Bearer health-tökén-for-testsé", "Bearer health-token-for-tests"])
def test_healthz_with_a_wrong_token_that_is_not_ascii_answers_like_any_wrong_token(
    world: World, health_token: str, header: str
) -> None:
    client = Client()
    wrong = client.get("/healthz", headers={"Authorization": "Bearer wrong"})
    odd = client.get("/healthz", headers={"Authorization": _header(header)})
    assert odd.status_code == wrong.status_code
    assert odd.json() == wrong.json()
    assert set(odd.json()) == {"ok"}  # the status, without the details


def test_healthz_takes_a_token_that_is_not_ascii(world: World, health_token: str) -> None:
    response = Client().get("/healthz", headers={"Authorization": _header(f"Bearer {health_token}")})
    assert set(response.json()) > {"ok"}  # the parts' details, as for staff
