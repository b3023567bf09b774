"""A brand-new Django project adds the assistant with the README alone.

`django-admin startproject mysite` in a temporary folder, a tiny `books` app of its own (a `Book` with
an owner and a title; `@tool` on its create and rename views, a `readable` shelf), and then only the
code blocks of the README's "Add the assistant to your project" section, taken from README.md by
heading and applied as a person would (append the settings block, replace asgi.py, write celery.py and
__init__.py, add the include, put the tag in a template). Only the service addresses are substituted:
the suite's PostgreSQL with a fresh database of the project's own, and the suite's Redis at a database
number of its own. Then migrate, check, daphne and `celery -A mysite worker` in real processes, two
people signed in through the project's own auth, and turns over the websocket with the offline model."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from urllib.request import Request, urlopen

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import PROJECT_DIR, log_tail, stop_process

README = PROJECT_DIR / "README.md"
SECTION = "Add the assistant to your project"
PROJECT = "mysite"
# The new project's own Redis database on the suite's server: not the suite's (1) nor `make run`'s (0).
PROJECT_REDIS_DB = 12
# The addresses the README's settings block names, replaced by the suite's services.
README_REDIS_URL = "redis://127.0.0.1:6379/0"
STARTUP_SECONDS = 40
TURN_SECONDS = 30

# The project's own app, written the way docs/tools.md ("Add a tool", "Reads") says.
BOOKS_APP = {
    "models.py": '''
        from django.conf import settings
        from django.db import models


        class Book(models.Model):
            owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="books")
            title = models.CharField(max_length=200)

            def __str__(self) -> str:
                return self.title
        ''',
    "forms.py": '''
        from django import forms


        class BookForm(forms.Form):
            title = forms.CharField(max_length=200, help_text="The book's title.")
        ''',
    "views.py": '''
        from django.contrib import messages
        from django.contrib.auth.decorators import login_required
        from django.shortcuts import get_object_or_404, redirect
        from django.template.response import TemplateResponse
        from django.views.decorators.http import require_POST

        from assistant.tools import tool

        from .forms import BookForm
        from .models import Book


        @login_required
        def shelf(request):
            return TemplateResponse(request, "books/shelf.html", {"books": Book.objects.filter(owner=request.user)})


        @tool(name="books_book_create", form=BookForm, description="Add a book to your shelf, with its title.")
        @login_required
        @require_POST
        def book_create(request):
            form = BookForm(request.POST)
            if not form.is_valid():
                return TemplateResponse(request, "books/form.html", {"form": form})
            book = Book.objects.create(owner=request.user, title=form.cleaned_data["title"])
            messages.success(request, f"Book “{book.title}” added.")
            return redirect("books:shelf")


        @tool(name="books_book_rename", form=BookForm, descriptions={"pk": "Id of the book."},
              description="Rename a book on your shelf: give the book's id and its new title.")
        @login_required
        @require_POST
        def book_rename(request, pk):
            book = get_object_or_404(Book, pk=pk, owner=request.user)
            form = BookForm(request.POST)
            if not form.is_valid():
                return TemplateResponse(request, "books/form.html", {"form": form})
            book.title = form.cleaned_data["title"]
            book.save(update_fields=["title"])
            messages.success(request, f"Book renamed to “{book.title}”.")
            return redirect("books:shelf")
        ''',
    "urls.py": '''
        from django.urls import path

        from . import views

        app_name = "books"
        urlpatterns = [
            path("", views.shelf, name="shelf"),
            path("new/", views.book_create, name="create"),
            path("<int:pk>/rename/", views.book_rename, name="rename"),
        ]
        ''',
    "assistant_tools.py": '''
        from assistant.tools import authored, readable

        from books import views  # noqa: F401  (the @tool declarations on the views)
        from books.models import Book

        readable(Book, name="books_book_list", fields=["id", "title"],
                 scope=lambda user, books: books.filter(owner=user), search=["title"],
                 description="List the books on your shelf (id, title); find one by title with search.")
        authored(Book, by="owner")  # a book's title is its owner's text
        ''',
    "templates/books/form.html": "{{ form.as_p }}\n",
}
SHELF_LIST = '<ul id="shelf">{% for book in books %}<li>{{ book.pk }}: {{ book.title }}</li>{% endfor %}</ul>'


# The README section, by heading.


@dataclass
class Block:
    language: str
    text: str


@dataclass
class Step:
    title: str
    prose: str = ""
    blocks: list[Block] = field(default_factory=list)

    def block(self, language: str, index: int = 0) -> str:
        found = [block.text for block in self.blocks if block.language == language]
        assert len(found) > index, f"README step {self.title!r} has no {language} block number {index + 1}"
        return found[index]


def readme_steps() -> dict[str, Step]:
    """The steps of the README section by their title without the number ("Settings", "ASGI", ...)."""
    text = README.read_text()
    match = re.search(rf"^## {re.escape(SECTION)}\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no section {SECTION!r}"
    steps: dict[str, Step] = {}
    current: Step | None = None
    fence: Block | None = None
    for line in match.group(1).splitlines(keepends=True):
        if fence is not None:
            if line.startswith("```"):
                assert current is not None
                current.blocks.append(fence)
                fence = None
            else:
                fence.text += line
        elif line.startswith("```"):
            fence = Block(language=line[3:].strip(), text="")
        elif heading := re.match(r"### \d+\. (.+)", line):
            current = steps[heading.group(1).strip()] = Step(title=heading.group(1).strip())
        elif current is not None:
            current.prose += line
    return steps


def code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def substitute_services(block: str, database: dict[str, Any], redis_url: str) -> str:
    """The settings block with the suite's services in place of the README's local addresses."""
    for key, value in database.items():
        pattern = re.compile(rf'("{key}":\s*)("[^"]*"|\d+)')
        found = pattern.findall(block)
        assert len(found) == 1, f"the README's settings block names the database {key} {len(found)} times, not once"
        block = pattern.sub(lambda match: match.group(1) + json.dumps(value), block)  # noqa: B023 (used at once)
    assert block.count(README_REDIS_URL) == 2, (
        f"the README's settings block should point the channel layer and the broker at {README_REDIS_URL}"
    )
    return block.replace(README_REDIS_URL, redis_url)


def test_the_readme_counts_the_settings_lines_it_shows() -> None:
    steps = readme_steps()
    block = steps["Settings"].block("python")
    shown = code_lines(block)
    databases = re.search(r"DATABASES = .*?\}\}\n", block, re.DOTALL)
    assert databases, block
    database = code_lines(databases.group(0))
    stated = re.search(r"That is (\d+) lines \((\d+) when the project already uses PostgreSQL\)",
                       steps["Settings"].prose)
    assert stated, "the Settings step should say how many lines it adds"
    assert (int(stated.group(1)), int(stated.group(2))) == (shown, shown - database)
    assert shown <= 10, "issue 10: at most 10 lines of settings for a project with no Channels or Celery yet"


# Real processes of the new project.


class Project:
    """The new project on disk and the processes started for it; `stop()` ends every one of them."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self.package = root / PROJECT
        self.processes: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def run(self, *args: str, timeout: float = 60) -> str:
        """A command in the project folder (a leading `python`/`celery`/`django-admin` runs from this
        interpreter's environment); its output, or a failure showing the output's tail."""
        completed = subprocess.run(_command(args), cwd=self.root, env=self.env, capture_output=True, text=True,
                                   timeout=timeout)
        output = completed.stdout + completed.stderr
        assert completed.returncode == 0, f"`{' '.join(args)}` exited with {completed.returncode}:\n{output[-4000:]}"
        return output

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log_path = self.root.parent / f"{name}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(_command(args), cwd=self.root, env=self.env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append((name, process, log_path))
        return process

    def wait_until(self, name: str, ready: Any, what: str) -> None:
        """Until `ready()` holds; fails with the process's output when it exits or takes too long."""
        (process, log_path), = [(process, log) for known, process, log in self.processes if known == name]
        deadline = time.monotonic() + STARTUP_SECONDS
        while not ready():
            if process.poll() is not None:
                pytest.fail(f"{name} exited with {process.returncode} before {what}:\n{log_tail(log_path)}")
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not get to {what} within {STARTUP_SECONDS}s:\n{log_tail(log_path)}")
            time.sleep(0.1)

    def log(self, name: str) -> str:
        return "\n".join(log_tail(log) for known, _, log in self.processes if known == name)

    def whole_log(self, name: str) -> str:
        return "\n".join(log.read_text(errors="replace") for known, _, log in self.processes if known == name)

    def stop(self) -> None:
        for _, process, _ in reversed(self.processes):
            if process.poll() is None:
                stop_process(process)


def _command(args: tuple[str, ...]) -> list[str]:
    program, *rest = args
    modules = {"python": [], "celery": ["-m", "celery"], "django-admin": ["-m", "django"], "daphne": ["-m", "daphne"]}
    assert program in modules, f"no way to run {program!r} here"
    return [sys.executable, *modules[program], *rest]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _postgres(database: str) -> Any:
    import psycopg

    params = connection.settings_dict
    return psycopg.connect(host=params["HOST"] or None, port=params["PORT"] or None, user=params["USER"],
                           password=params["PASSWORD"] or None, dbname=database, autocommit=True)


@pytest.fixture
def project_database() -> Iterator[dict[str, Any]]:
    """A fresh database for the new project on the suite's PostgreSQL, dropped afterwards."""
    name = f"new_project_{os.getpid()}"
    with _postgres("postgres") as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{name}"')
    params = connection.settings_dict
    yield {"HOST": params["HOST"], "PORT": int(params["PORT"] or 5432), "NAME": name, "USER": params["USER"],
           "PASSWORD": params["PASSWORD"] or ""}
    with _postgres("postgres") as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def project_redis_url() -> Iterator[str]:
    """The suite's Redis server at a database number of the new project's own, emptied before and after."""
    import redis

    parts = urlsplit(str(settings.REDIS_URL))
    url = str(urlunsplit(parts._replace(path=f"/{PROJECT_REDIS_DB}")))
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture
def new_project(tmp_path: Path, project_database: dict[str, Any], project_redis_url: str) -> Iterator[Project]:
    # Only the two apps of this checkout on the path, as an installed distribution gives them: nothing of
    # this repo's site (config, tracker, devstack) is importable by the new project.
    distribution = tmp_path / "distribution"
    distribution.mkdir()
    for app in ("assistant", "registry"):
        (distribution / app).symlink_to(PROJECT_DIR / app, target_is_directory=True)
    inherited = {"DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PYTHONPATH",
                 "ASSISTANT_MODEL", "ASSISTANT_EMBEDDER"}
    env = {key: value for key, value in os.environ.items() if key not in inherited}
    env |= {"PYTHONPATH": str(distribution), "PYTHONUNBUFFERED": "1"}
    site = tmp_path / "site"
    site.mkdir()
    Project(site, env).run("django-admin", "startproject", PROJECT)
    project = Project(site / PROJECT, env)
    try:
        _write_books_app(project.root)
        _apply_readme(project, project_database, project_redis_url)
        yield project
    finally:
        project.stop()


def _write_books_app(root: Path) -> None:
    import textwrap

    app = root / "books"
    for name, text in {"__init__.py": "", "migrations/__init__.py": "", **BOOKS_APP}.items():
        (app / name).parent.mkdir(parents=True, exist_ok=True)
        (app / name).write_text(textwrap.dedent(text).lstrip("\n"))


def _apply_readme(project: Project, database: dict[str, Any], redis_url: str) -> None:
    """The README section's blocks, applied to the files `startproject` wrote."""
    steps = readme_steps()
    package = project.package

    settings_file = package / "settings.py"
    block = substitute_services(steps["Settings"].block("python"), database, redis_url)
    settings_file.write_text(settings_file.read_text() + "\n" + block + 'INSTALLED_APPS += ["books"]\n')

    (package / "asgi.py").write_text(steps["ASGI"].block("python"))

    urls_file = package / "urls.py"
    urls_block = steps["URLs"].block("python").splitlines()
    imports = [line for line in urls_block if line.startswith(("from ", "import "))]
    assert any(line.startswith("from django.urls import") for line in imports), urls_block
    routes = [line for line in urls_block if line.strip().startswith("path(")]
    urls = urls_file.read_text()
    assert "from django.urls import path\n" in urls and "urlpatterns = [\n" in urls, urls
    urls = urls.replace("from django.urls import path\n", "".join(f"{line}\n" for line in imports))
    urls = urls.replace("urlpatterns = [\n", "urlpatterns = [\n" + "".join(f"{route}\n" for route in routes)
                        + '    path("books/", include("books.urls")),\n')
    urls_file.write_text(urls)

    template = steps["Templates"].block("django")
    assert "\n    ...\n" in template, template
    shelf = project.root / "books" / "templates" / "books" / "shelf.html"
    shelf.write_text(template.replace("\n    ...\n", f"\n    {SHELF_LIST}\n"))

    (package / "celery.py").write_text(steps["Celery"].block("python", 0))
    (package / "__init__.py").write_text(steps["Celery"].block("python", 1))


def _services_commands() -> dict[str, list[str]]:
    """The commands the README's Services step runs, by what they do."""
    lines = [line.split("#")[0].split() for line in _services_block().splitlines()]
    commands = {"migrate": ["python", "manage.py", "migrate"],
                "check": ["python", "manage.py", "check", "--database", "default"],
                "worker": ["celery", "-A", PROJECT, "worker"]}
    for what, command in commands.items():
        found = [line for line in lines if line[: len(command)] == command]
        assert found, f"the README's Services step no longer runs `{' '.join(command)}`"
        commands[what] = found[0]
    return commands


def _services_block() -> str:
    blocks = [block.text for block in readme_steps()["Services"].blocks if "manage.py migrate" in block.text]
    assert blocks, "the README's Services step has no block that runs migrate"
    return blocks[0]


def _start_up_line() -> str:
    """The worker's start-up line as the README's Celery step quotes it, as a pattern (the time aside)."""
    quoted = re.search(r"`(Worker ready for its first turn: [^`]*)`", " ".join(readme_steps()["Celery"].prose.split()))
    assert quoted, "the README's Celery step no longer quotes the worker's start-up line"
    timed = re.fullmatch(r"(.*) in \d+(?:\.\d+)? s", quoted.group(1))
    assert timed, f"the quoted start-up line {quoted.group(1)!r} should end with the time it took"
    return re.escape(timed.group(1)) + r" in \d+\.\d+ s"


def _issues(check_output: str) -> set[str]:
    return set(re.findall(r"\((\w+\.[EWIC]\d+)\)", check_output))


# Signing in and talking to the assistant, as a browser would.

SIGN_IN = """
import json
from django.contrib.auth import get_user_model
from django.test import Client

sessions = {}
for name in ("alice", "bob"):
    get_user_model().objects.create_user(username=name, password="a long pass phrase")
    client = Client()
    assert client.login(username=name, password="a long pass phrase")
    sessions[name] = client.cookies["sessionid"].value
print("SESSIONS=" + json.dumps(sessions))
"""

SHELVES = """
import json
from books.models import Book
print("BOOKS=" + json.dumps([[book.pk, book.owner.username, book.title] for book in Book.objects.order_by("pk")]))
"""


def _printed(output: str, label: str) -> Any:
    (line,) = [line for line in output.splitlines() if line.startswith(f"{label}=")]
    return json.loads(line.removeprefix(f"{label}="))


async def _turn(port: int, session: str, content: str) -> list[dict[str, Any]]:
    """One message over the assistant's socket; every event until its run ends."""
    import websockets

    origin = f"http://127.0.0.1:{port}"
    events: list[dict[str, Any]] = []
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws/assistant/", origin=origin,  # type: ignore[arg-type]
                                  additional_headers={"Cookie": f"sessionid={session}"}) as socket_:
        await socket_.send(json.dumps({"type": "assistant.send", "content": content}))
        deadline = time.monotonic() + TURN_SECONDS
        while True:
            event = json.loads(await asyncio.wait_for(socket_.recv(), max(0.1, deadline - time.monotonic())))
            events.append(event)
            if event["type"] in {"assistant.replied", "assistant.reply_failed", "assistant.error"}:
                return events


def turn(project: Project, port: int, session: str, content: str) -> tuple[list[dict[str, Any]], str]:
    """The tool calls the run made (name, arguments, result) and its reply."""
    from websockets.exceptions import WebSocketException

    try:
        events = asyncio.run(_turn(port, session, content))
    except (TimeoutError, OSError, WebSocketException) as error:
        pytest.fail(f"the turn {content!r} did not end ({error!r}):\n{project.log('worker')}\n{project.log('daphne')}")
    last = events[-1]
    assert last["type"] == "assistant.replied", f"{last}\n{project.log('worker')}"
    calls = [event["step"] for event in events
             if event["type"] == "assistant.step" and event["step"]["kind"] == "tool_call"
             and event["step"]["state"] == "finished"]
    return calls, last["message"]["content"]


def _get(port: int, path: str, session: str) -> tuple[int, str]:
    request = Request(f"http://127.0.0.1:{port}{path}", headers={"Cookie": f"sessionid={session}"})
    with urlopen(request, timeout=10) as response:
        return response.status, response.read().decode()


def test_a_new_project_configured_from_the_readme_alone_runs_a_turn_through_its_own_view(
    new_project: Project, project_redis_url: str
) -> None:
    project = new_project
    commands = _services_commands()
    project.run("python", "manage.py", "makemigrations", "books")
    project.run(*commands["migrate"])
    # Before any worker: the one thing missing is the worker that sweeps.
    before = project.run(*commands["check"])
    assert _issues(before) <= {"assistant.W022"}, before

    port = _free_port()
    project.start("daphne", "daphne", "-b", "127.0.0.1", "-p", str(port), f"{PROJECT}.asgi:application")
    project.start("worker", *commands["worker"], "--concurrency", "1", "--without-gossip", "--without-mingle")
    project.wait_until("daphne", lambda: _accepts(port), "listening")
    project.wait_until("worker", lambda: " ready." in project.log("worker"), "ready")
    # It says what it loaded in the words the README quotes, with no LOGGING of the project's own.
    assert re.search(_start_up_line(), project.whole_log("worker")), project.whole_log("worker")

    sessions = _printed(project.run("python", "manage.py", "shell", "-c", SIGN_IN), "SESSIONS")

    # The dock is on the project's own page for the signed-in person; the assistant's page stands alone.
    status, shelf = _get(port, "/books/", sessions["alice"])
    assert status == 200 and 'id="assistant-dock"' in shelf and '<ul id="shelf"></ul>' in shelf, shelf[:2000]
    status, page = _get(port, "/assistant/", sessions["alice"])
    assert status == 200 and "data-assistant-conversation" in page, page[:2000]

    # Each person's turn runs the app's own create view as that person.
    calls, reply = turn(project, port, sessions["bob"], "Add a book titled 'The Hobbit'")
    assert [(call["tool_name"], call["result"]["status"]) for call in calls] == [("books_book_create", "done")], calls
    assert "The Hobbit" in reply
    calls, reply = turn(project, port, sessions["alice"], "Add a book titled 'Dune'")
    assert [(call["tool_name"], call["result"]["status"]) for call in calls] == [("books_book_create", "done")], calls
    books = _printed(project.run("python", "manage.py", "shell", "-c", SHELVES), "BOOKS")
    assert [owner_and_title for _, *owner_and_title in books] == [["bob", "The Hobbit"], ["alice", "Dune"]]
    (hobbit, dune) = (books[0][0], books[1][0])

    # Alice's model names Bob's book: refused like a missing row, nothing changed.
    calls, reply = turn(project, port, sessions["alice"], f"Rename book {hobbit} to 'Mine now'")
    assert [(call["tool_name"], call["arguments"], call["result"]["status"]) for call in calls] == [
        ("books_book_rename", {"pk": hobbit, "title": "Mine now"}, "not_found")
    ], calls
    assert "not found" in reply
    # The same call on her own book goes through: the refusal was the ownership, not a broken tool.
    calls, reply = turn(project, port, sessions["alice"], f"Rename book {dune} to 'Dune Messiah'")
    assert [(call["tool_name"], call["result"]["status"]) for call in calls] == [("books_book_rename", "done")], calls
    books = _printed(project.run("python", "manage.py", "shell", "-c", SHELVES), "BOOKS")
    assert books == [[hobbit, "bob", "The Hobbit"], [dune, "alice", "Dune Messiah"]]

    # The health check, where the README's URLs step routes it: at the root and under the include.
    for path in ("/healthz", "/assistant/healthz"):
        status, health = _get(port, path, "")
        assert (status, json.loads(health)) == (200, {"ok": True}), (path, health)

    # With the worker up and its first sweep done, the project's check has nothing left to say.
    import redis

    from assistant.operations.health import SWEEPER_HEARTBEAT_KEY

    heartbeat = redis.Redis.from_url(project_redis_url)
    project.wait_until("worker", lambda: heartbeat.exists(SWEEPER_HEARTBEAT_KEY), "its first sweep")
    heartbeat.close()
    after = project.run(*commands["check"])
    assert _issues(after) == set() and "no issues" in after, after


CELERY_IMPORT = "from .celery import app as celery_app"


async def _first_answer(port: int, session: str, content: str) -> list[dict[str, Any]]:
    """One message over the assistant's socket; its events until the first error (or its reply)."""
    import websockets

    events: list[dict[str, Any]] = []
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws/assistant/", origin=f"http://127.0.0.1:{port}",  # type: ignore[arg-type]
                                  additional_headers={"Cookie": f"sessionid={session}"}) as socket_:
        await socket_.send(json.dumps({"type": "assistant.send", "content": content}))
        while not events or events[-1]["type"] not in {"assistant.error", "assistant.replied"}:
            events.append(json.loads(await asyncio.wait_for(socket_.recv(), TURN_SECONDS)))
    return events


def test_a_project_that_leaves_out_importing_its_celery_app_is_told_the_line_by_check_and_by_the_send_log(
    new_project: Project,
) -> None:
    """Without the README's `__init__.py` line every process uses Celery's default app, which sends to
    amqp://localhost: the project's broker never hears of a message."""
    project = new_project
    commands = _services_commands()
    project.run("python", "manage.py", "makemigrations", "books")
    project.run(*commands["migrate"])
    init = project.package / "__init__.py"
    assert CELERY_IMPORT in init.read_text()
    init.write_text("")  # left out

    checked = subprocess.run(_command(tuple(commands["check"])), cwd=project.root, env=project.env,
                             capture_output=True, text=True, timeout=60)
    said = checked.stdout + checked.stderr
    assert checked.returncode != 0 and "assistant.E027" in _issues(said), said
    assert CELERY_IMPORT in said and f"{PROJECT}/__init__.py" in said, said

    port = _free_port()
    project.start("daphne", "daphne", "-b", "127.0.0.1", "-p", str(port), f"{PROJECT}.asgi:application")
    project.wait_until("daphne", lambda: _accepts(port), "listening")
    sessions = _printed(project.run("python", "manage.py", "shell", "-c", SIGN_IN), "SESSIONS")
    events = asyncio.run(_first_answer(port, sessions["alice"], "Add a book titled 'Dune'"))
    # The person is told the message is kept; the log says why nothing answers it, and the fix.
    assert [event["type"] for event in events] == ["assistant.sent", "assistant.error"], events
    project.wait_until("daphne", lambda: "Celery's default app" in project.whole_log("daphne"), "the send's log")
    (line,) = [line for line in project.whole_log("daphne").splitlines() if "Celery's default app" in line]
    assert CELERY_IMPORT in line and f"{PROJECT}/__init__.py" in line, line
