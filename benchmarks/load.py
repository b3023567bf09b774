"""The load harness: the site as `make run` lays it out, on a throwaway database, with people signed in and
browser tabs open on the assistant's socket. Importable after `django.setup()`.

    with stack(model="offline", database_name="bench_example") as site:
        crowd = people(100, "load")                      # users with signed-in sessions
        before = cpu_seconds(site)
        tabs = await open_tabs(site, crowd)              # (inside asyncio) two sockets a person
        await tabs[0].send({"type": "assistant.send", "content": "hi", "new_chat": True})
        ...
        spent = {kind: cpu_seconds(site)[kind] - before[kind] for kind in before}

`stack` starts the Celery worker (a pool of two, without gossip or mingle) and daphne with `make run`'s own
command lines (devstack.commands), both on the throwaway database and with `ASSISTANT_MODEL` set: the model
is the only part replaced. Tabs are plain websocket clients with a session cookie and an allowed Origin, as a
browser's; they record every frame with the time it arrived and interpret nothing (see docs/protocol.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import connection

from devstack.commands import daphne_command, worker_command

PROJECT_DIR = Path(__file__).resolve().parent.parent
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 15.0
HOST = "127.0.0.1"
LOG_DIR = PROJECT_DIR / ".data"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_worker_numbers = itertools.count(1)


# --- the throwaway database ----------------------------------------------------------------------------

def _database_url(name: str) -> str:
    """The configured DATABASE_URL, pointed at the database `name` (the same server and credentials)."""
    configured = str(settings.DATABASE_URL)  # the site refuses to start without one
    return urlunsplit(urlsplit(configured)._replace(path="/" + name))


@contextmanager
def throwaway_database(name: str) -> Iterator[str]:
    """The database `name`, created and migrated now (replacing one left by an interrupted run) and dropped at
    exit; this process's connection uses it meanwhile. Yields its URL for the processes started on it."""
    test_settings = connection.settings_dict.setdefault("TEST", {})
    saved_test_name = test_settings.get("NAME")
    test_settings["NAME"] = name
    old_name = connection.settings_dict["NAME"]
    # A connection pool (DATABASES' "pool" option) keeps the database it was opened on: left open, it would
    # hand the migrations below connections to the old database, and the new one would stay empty.
    connection.close()
    if hasattr(connection, "close_pool"):
        connection.close_pool()
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        try:
            yield _database_url(name)
        finally:
            # The processes that used it are gone, but PostgreSQL ends their sessions a moment later; a
            # database that still has sessions cannot be dropped.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            connection.close()
            connection.creation.destroy_test_db(old_name, verbosity=0)
    finally:
        test_settings["NAME"] = saved_test_name
        # The pool was opened on the throwaway database, and the turns run in this process may have left it
        # connections that threads never returned: a pool of its own for whatever this process does next.
        connection.close()
        if hasattr(connection, "close_pool"):
            connection.close_pool()


# --- the site's processes ------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the process and everything in its process group: a warm stop, then a kill if it lingers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # pool children a warm stop left behind too
    process.wait()


def clear_leftovers() -> None:
    """Runs left in the queue by an interrupted run would be delivered against the new database, whose ids
    start again at 1, and so would its cancel flags (keyed by run id)."""
    from assistant.infra.redis_connection import redis_client
    from config.celery import app

    app.control.purge()
    client = redis_client()
    for key in client.scan_iter("assistant:*"):
        client.delete(key)


def _tail(log: Path | None, lines: int = 30) -> str:
    if log is None:
        return "(its output is above)"
    return f"{log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def celery_worker(env: dict[str, str], *, concurrency: int = 2, log: Path | None = None
                  ) -> Iterator[subprocess.Popen[bytes]]:
    """`make run`'s worker in a process group of its own, with `env` (and its output in `log`, if given);
    yields once it answers a ping on the broker, and stops it (pool processes included) at exit."""
    from config.celery import app

    hostname = f"load-{os.getpid()}-{next(_worker_numbers)}"
    # Without a log, its output is this process's own.
    with log.open("wb") if log is not None else contextlib.nullcontext() as output:
        worker = subprocess.Popen(
            worker_command(sys.executable, hostname=f"{hostname}@%h", loglevel="WARNING", concurrency=concurrency),
            cwd=PROJECT_DIR, env=env, start_new_session=True, stdout=output,
            stderr=subprocess.STDOUT if output is not None else None,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not any(name.startswith(f"{hostname}@") for reply in app.control.ping(timeout=0.5) or []
                      for name in reply):
            if worker.poll() is not None:
                raise RuntimeError(f"The benchmark's Celery worker exited with code {worker.returncode} while "
                                   f"starting: {_tail(log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"The benchmark's Celery worker did not answer within {START_TIMEOUT_SECONDS:.0f}s.")
        yield worker
    finally:
        _stop(worker)


@contextmanager
def daphne(env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`make run`'s daphne on a free port, its output in `log`; yields it and its port once it answers HTTP."""
    port = _free_port()
    with log.open("wb") as output:
        web = subprocess.Popen(daphne_command(sys.executable, host=HOST, port=port), cwd=PROJECT_DIR, env=env,
                               start_new_session=True, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if web.poll() is not None:
                raise RuntimeError(f"The benchmark's daphne exited with code {web.returncode} while starting: "
                                   f"{_tail(log)}")
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}/login/", timeout=3):  # noqa: S310 (our loopback)
                    break
            except urllib.error.HTTPError:
                break  # any HTTP answer means it serves
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"The benchmark's daphne did not answer within {START_TIMEOUT_SECONDS:.0f}s."
                    ) from exc
                time.sleep(0.2)
        yield web, port
    finally:
        _stop(web)


def _postmaster_pid() -> int:
    """The PostgreSQL server's main process: the parent of this connection's backend."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = int(cursor.fetchone()[0])
    stat = _read_stat(backend)
    if stat is None or "postgres" not in _command_name(backend):
        raise RuntimeError("The benchmark measures the database server's CPU, so PostgreSQL must run on this "
                           "machine (as the embedded one of `make bench` does).")
    return stat.parent


def _redis_pid() -> int:
    from assistant.infra.redis_connection import redis_client

    pid = int(redis_client().info("server")["process_id"])
    if _read_stat(pid) is None or not any(name in _command_name(pid) for name in ("redis", "valkey")):
        raise RuntimeError("The benchmark measures Redis's CPU, so Redis must run on this machine "
                           "(as the embedded one of `make bench` does).")
    return pid


@dataclass
class Stack:
    """The site's processes on the throwaway database; see `stack`."""

    http_url: str
    ws_url: str
    database_url: str
    model: str
    web: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    postgres_pid: int
    redis_pid: int
    #: The output of "web" (daphne) and "worker", kept after the stack stops; "web-<spec>" for another spec's daphne.
    logs: dict[str, Path]
    #: The spec each daphne gives new chats (ASSISTANT_SPEC), and its port: the first is `web`'s.
    ports: dict[str, int] = field(default_factory=dict)
    #: The daphnes of the other specs, if any.
    other_webs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return self.http_url.rstrip("/")

    @property
    def specs(self) -> list[str]:
        return list(self.ports)

    def ws_url_for(self, spec: str | None = None) -> str:
        """The socket of the daphne whose new chats are under `spec` (None: the first)."""
        return self.ws_url if spec is None else f"ws://{HOST}:{self.ports[spec]}/ws/assistant/"

    def origin_for(self, spec: str | None = None) -> str:
        return self.origin if spec is None else f"http://{HOST}:{self.ports[spec]}"

    def processes(self) -> dict[str, list[int]]:
        """The pids of every process of each kind now: daphne (every one); the worker with its pool processes;
        the PostgreSQL server with its backends; Redis."""
        children = _children_by_parent()
        return {
            "web": [pid for web in (self.web, *self.other_webs) for pid in _tree(web.pid, children)],
            "worker": _tree(self.worker.pid, children),
            "postgres": _tree(self.postgres_pid, children),
            "redis": _tree(self.redis_pid, children),
        }


@contextmanager
def stack(*, model: str, database_name: str, worker_concurrency: int = 2,
          specs: Sequence[str] = ("default",)) -> Iterator[Stack]:
    """A throwaway database `database_name` (created, migrated, dropped at exit), a Celery worker with
    `make run`'s flags and daphne on a free port, both on that database with `ASSISTANT_MODEL=model`. Yields
    once both answer; stops both (their process groups) at exit.

    `specs`: the spec new chats get (ASSISTANT_SPEC), one daphne each; the first is the worker's too. The
    default is the single assistant (the site's own default is the demo society): what these benchmarks always
    measured. A run keeps its chat's spec, so one worker serves every spec the site declares."""
    clear_leftovers()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    if not specs or len(set(specs)) != len(specs):
        raise ValueError(f"specs must name each spec once: {specs!r}")
    logs = {kind: LOG_DIR / f"{database_name}-{kind}.log" for kind in ("web", "worker")}
    logs.update({f"web-{spec}": LOG_DIR / f"{database_name}-web-{spec}.log" for spec in specs[1:]})
    with throwaway_database(database_name) as database_url:
        env = {**os.environ, "DATABASE_URL": database_url, "ASSISTANT_MODEL": model, "ASSISTANT_SPEC": specs[0],
               "DJANGO_SETTINGS_MODULE": settings.SETTINGS_MODULE, "LOG_LEVEL": "WARNING"}
        postgres_pid, redis_pid = _postmaster_pid(), _redis_pid()
        try:
            with celery_worker(env, concurrency=worker_concurrency, log=logs["worker"]) as worker, \
                    daphne(env, logs["web"]) as (web, port), contextlib.ExitStack() as others:
                ports = {specs[0]: port}
                other_webs = []
                for spec in specs[1:]:
                    other, ports[spec] = others.enter_context(
                        daphne({**env, "ASSISTANT_SPEC": spec}, logs[f"web-{spec}"]))
                    other_webs.append(other)
                yield Stack(http_url=f"http://{HOST}:{port}/", ws_url=f"ws://{HOST}:{port}/ws/assistant/",
                            database_url=database_url, model=model, web=web, worker=worker,
                            postgres_pid=postgres_pid, redis_pid=redis_pid, logs=logs, ports=ports,
                            other_webs=other_webs)
        finally:
            for kind, log in logs.items():
                if log.exists() and any(mark in log.read_text(errors="replace") for mark in ("Traceback", " ERROR ")):
                    print(f"The benchmark's {kind} process logged errors: see {log}", file=sys.stderr, flush=True)


# --- CPU time, from /proc ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Stat:
    parent: int
    #: user + system time of the process itself, and of its children that ended and were reaped by it.
    own_seconds: float
    reaped_seconds: float


def _read_stat(pid: int | str) -> _Stat | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None  # it ended meanwhile
    # The command name, in parentheses, may hold spaces: the fields that follow are counted from its end.
    fields = text[text.rindex(")") + 2:].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return _Stat(parent=int(fields[1]), own_seconds=(utime + stime) / _CLOCK_TICKS,
                 reaped_seconds=(cutime + cstime) / _CLOCK_TICKS)


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _read_stat(entry.name)) is not None:
            children.setdefault(stat.parent, []).append(int(entry.name))
    return children


def _tree(root: int, children: dict[int, list[int]]) -> list[int]:
    found, waiting = [], [root]
    while waiting:
        pid = waiting.pop()
        found.append(pid)
        waiting.extend(children.get(pid, []))
    return found


def cpu_seconds(site: Stack) -> dict[str, float]:
    """Cumulative user + system CPU seconds per kind ("web", "worker", "postgres", "redis", and "client":
    this process). A kind counts each live process of it plus the children those reaped (a PostgreSQL
    backend that ended is counted in its postmaster). Take the difference of two readings for a phase."""
    spent = {}
    for kind, pids in site.processes().items():
        stats = [stat for pid in pids if (stat := _read_stat(pid)) is not None]
        spent[kind] = sum(stat.own_seconds + stat.reaped_seconds for stat in stats)
    # This process only: the site's processes are its children, and would be counted again once reaped.
    own = _read_stat("self")
    assert own is not None
    spent["client"] = own.own_seconds
    return spent


# --- people and their tabs -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Person:
    user_id: int
    username: str
    session_key: str
    #: The `Cookie` header a browser of this session sends.
    cookie: str


def people(count: int, prefix: str) -> list[Person]:
    """`count` users named `<prefix>-<n>` in the (throwaway) database, each signed in once, as the login page
    does it: `django.contrib.auth.login` on a session of the configured session engine, saved."""
    from django.contrib.auth import get_user_model, login
    from django.http import HttpRequest

    engine = import_module(settings.SESSION_ENGINE)
    backend = settings.AUTHENTICATION_BACKENDS[0]
    made = []
    for number in range(1, count + 1):
        # No password: hashing one costs ~0.3 s a user, and a signed-in session does not need it.
        user = get_user_model().objects.create_user(f"{prefix}-{number}")
        request = HttpRequest()
        request.session = engine.SessionStore()
        login(request, user, backend=backend)
        request.session.save()
        key = request.session.session_key or ""
        made.append(Person(user_id=user.pk, username=user.get_username(), session_key=key,
                           cookie=f"{settings.SESSION_COOKIE_NAME}={key}"))
    return made


@dataclass(eq=False)
class Tab:
    """One browser tab's socket. `frames` holds every frame received, as (time.monotonic() at receipt,
    the decoded JSON object), in the order they arrived."""

    person: Person
    number: int
    frames: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    #: The close code once the socket closed (by either side), else None.
    close_code: int | None = None
    _socket: Any = None
    _reader: asyncio.Task[None] | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, frame: dict[str, Any]) -> None:
        await self._socket.send(json.dumps(frame))

    async def close(self) -> None:
        await self._socket.close()
        if self._reader is not None:
            await self._reader

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], *, timeout: float,
                       start: int = 0) -> tuple[float, dict[str, Any]]:
        """The first frame from position `start` on for which `predicate` is true, waiting for it up to
        `timeout` seconds (TimeoutError), or until the socket closes (ConnectionError)."""
        deadline = time.monotonic() + timeout
        position = start
        while True:
            self._arrived.clear()
            for received, frame in self.frames[position:]:
                if predicate(frame):
                    return received, frame
            position = len(self.frames)
            if self._reader is None or self._reader.done():
                raise ConnectionError(f"tab {self.number} of {self.person.username} closed ({self.close_code}) "
                                      "before the frame came")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"tab {self.number} of {self.person.username}: no such frame in {timeout:.0f}s")
            # Woken by the next frame or by the socket closing.
            waiter = asyncio.ensure_future(self._arrived.wait())
            await asyncio.wait({waiter, self._reader}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for text in self._socket:
                self.frames.append((time.monotonic(), json.loads(text)))
                self._arrived.set()
        except ConnectionClosed:
            pass
        self.close_code = self._socket.close_code


async def _open_tab(site: Stack, person: Person, number: int, spec: str | None = None) -> Tab:
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    tab = Tab(person=person, number=number)
    # As a browser: no client pings (daphne pings, and the reader answers), no frame size limit.
    tab._socket = await connect(site.ws_url_for(spec), origin=Origin(site.origin_for(spec)),
                                additional_headers={"Cookie": person.cookie}, ping_interval=None, max_size=None,
                                open_timeout=START_TIMEOUT_SECONDS)
    tab._reader = asyncio.create_task(tab._read())
    return tab


async def open_tabs(site: Stack, crowd: Sequence[Person], tabs_per_person: int = 2, *,
                    spec: str | None = None) -> list[Tab]:
    """One socket per tab, `tabs_per_person` for each person (all opened at once), in the order of `crowd`:
    the first person's tabs first. Each reads every frame as it arrives from now on. `spec`: open them on the
    daphne whose new chats are under that spec (one of the stack's `specs`; None: the first)."""
    return list(await asyncio.gather(*(_open_tab(site, person, number, spec) for person in crowd
                                       for number in range(1, tabs_per_person + 1))))


def env_size(name: str, default: int, *, least: int = 1) -> int:
    """A size from the environment; anything but a whole number of at least `least` stops with a clear error."""
    text = os.environ.get(name, str(default))
    try:
        value = int(text)
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, not {text!r}") from None
    if value < least:
        raise SystemExit(f"{name} must be at least {least} (it is {value})")
    return value
