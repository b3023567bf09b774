"""`python -m devstack up|down|status|exec|run` — see `python -m devstack --help`.

A host project developed beside this checkout uses its servers too: `python -m devstack up --database mysite`
makes the project a database of its own and prints the settings lines to paste."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from types import FrameType

from devstack import sharing
from devstack.commands import daphne_command, worker_command
from devstack.services import (
    PROJECT_DIR,
    ServiceError,
    Started,
    create_host_database,
    default_paths,
    ensure_services,
    host_settings,
    port_is_free,
    status,
    stop_services,
    with_redis_db,
)
from devstack.supervisor import Supervisor


def _say(message: str) -> None:
    print(f"[devstack] {message}", flush=True)


# Redis databases of this checkout's own commands: `make run` 0, `make test` 1, `make bench` 2. A host
# project's worker on any of them would take up this site's turns (they share the queue's name).
HOST_REDIS_DB = 3


def cmd_up(args: argparse.Namespace) -> int:
    paths = default_paths()
    if args.database is not None and os.environ.get("DATABASE_URL"):
        _say("DATABASE_URL is set in the environment, so devstack starts no PostgreSQL and --database has "
             "nowhere to make the database: create it on that server, or unset DATABASE_URL.")
        return 2
    urls, started = ensure_services(paths, dict(os.environ))
    for name, url in urls.items():
        _say(f"{name}={url}")
    if not urls:
        _say("DATABASE_URL and REDIS_URL are set in the environment; nothing to start.")
    _say(f"started now: postgresql={started.postgres} valkey={started.valkey}")
    if args.database is not None:
        database = create_host_database(paths, args.database)
        redis_url = with_redis_db(urls.get("REDIS_URL") or os.environ["REDIS_URL"], args.redis_db)
        _say(f"database {database.name!r} {'created' if database.created else 'already there'}. In your "
             "project's settings, in place of the Settings step's DATABASES, CHANNEL_LAYERS and "
             "CELERY_BROKER_URL lines:")
        print(f"\n{host_settings(database, redis_url)}", flush=True)
        _say(f"or, with dj-database-url: DATABASE_URL={database.url} REDIS_URL={redis_url}")
        _say("`python -m devstack down` stops the servers; the data stays in " + str(paths.data))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    stopped = stop_services(default_paths())
    _say(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    for name, url in status(default_paths()).items():
        _say(f"{name}: {url or 'not running'}")
    return 0


def _child_environment(redis_db: int | None) -> tuple[dict[str, str], Started]:
    environ = dict(os.environ)
    urls, started = ensure_services(default_paths(), environ)
    environ.update(urls)
    if redis_db is not None:
        environ["REDIS_URL"] = with_redis_db(environ["REDIS_URL"], redis_db)
    return environ, started


def cmd_exec(args: argparse.Namespace) -> int:
    """Run a command with the services up; afterwards, stop what this command (or another one still using them
    when it started) started, unless another command uses them still."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _say("usage: python -m devstack exec [--redis-db N] -- COMMAND ...")
        return 2
    paths = default_paths()
    # With other commands on the same servers, the last of them to end stops them (devstack/sharing.py).
    environ = sharing.join(paths, lambda: _child_environment(args.redis_db))
    try:
        return subprocess.call(command, env=environ)
    finally:
        sharing.leave(paths, lambda started: None if args.keep else stop_services(paths, started))


def _wait_until_ready(base: str, supervisor: Supervisor, timeout: float) -> None:
    """Wait for daphne to serve, then for /healthz to see the worker too (it is 503 until then)."""
    deadline = time.monotonic() + timeout
    waiting_for = "daphne"
    while time.monotonic() < deadline:
        died = supervisor.exited()
        if died:
            raise ServiceError(f"{died[0]} exited with code {died[1]} while starting (see its output above).")
        url = base + ("login/" if waiting_for == "daphne" else "healthz")
        try:
            with urllib.request.urlopen(url, timeout=3):  # noqa: S310 (our own loopback URL)
                if waiting_for == "worker":
                    return
                waiting_for = "worker"
                continue
        except urllib.error.HTTPError as exc:
            if waiting_for == "daphne":
                raise ServiceError(f"{url} answered {exc.code}; see the output above.") from exc
        except OSError:
            pass
        time.sleep(0.5)
    raise ServiceError(f"The {waiting_for} was not ready within {timeout:.0f}s; see the output above.")


def cmd_run(args: argparse.Namespace) -> int:
    host, port = args.host, args.port
    if not port_is_free(host, port):
        _say(f"Port {port} on {host} is already in use (another `make run`?). "
             f"Stop it, or choose another port: PORT={port + 1} make run")
        return 1
    environ, started = _child_environment(None)
    environ.setdefault("DJANGO_DEBUG", "1")
    python = sys.executable
    supervisor = Supervisor(environ, PROJECT_DIR, _say)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        supervisor.stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if subprocess.call([python, "manage.py", "migrate", "--noinput"], env=environ, cwd=PROJECT_DIR) != 0:
            _say("`manage.py migrate` failed; see above.")
            return 1
        seeded = subprocess.run(
            [python, "manage.py", "seed_demo"], env=environ, cwd=PROJECT_DIR, capture_output=True, text=True
        )
        if seeded.returncode != 0:
            _say(f"`manage.py seed_demo` failed:\n{seeded.stderr}")
            return 1
        supervisor.spawn("worker", worker_command(python))
        supervisor.spawn("daphne", daphne_command(python, host=host, port=port))
        base = f"http://{host}:{port}/"
        _wait_until_ready(base, supervisor, timeout=90)
        print(
            f"\n  The app is running at {base}\n  The assistant page: {base}assistant/   Admin: {base}admin/\n"
            f"  Your own agent over MCP: {base}assistant/mcp/ (make a token at {base}assistant/tokens/)\n"
            f"  Demo logins (user / password):\n{seeded.stdout.rstrip()}\n  Press Ctrl-C to stop everything.\n",
            flush=True,
        )
        # From here on a process that exits is started again (with a growing pause if it keeps failing),
        # as a process manager would; one process's death never stops the others.
        while not supervisor.stopping:
            supervisor.tend()
            time.sleep(0.3)
        return 0
    except ServiceError as exc:
        _say(str(exc))
        return 1
    finally:
        _say("stopping worker and daphne ...")
        supervisor.stop()
        stopped = stop_services(default_paths(), started)
        _say(f"stopped. {('Embedded servers stopped: ' + ', '.join(stopped)) if stopped else ''}".strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start the embedded servers (where DATABASE_URL/REDIS_URL are unset)")
    up.add_argument("--database", metavar="NAME", default=None,
                    help="also make a database NAME for a project of your own, and print its settings lines")
    up.add_argument("--redis-db", type=int, default=HOST_REDIS_DB,
                    help=f"the Redis database those lines name (default {HOST_REDIS_DB}: not one of this "
                    "checkout's own 0-2)")
    sub.add_parser("down", help="stop the embedded servers")
    sub.add_parser("status", help="show which embedded servers run")
    run = sub.add_parser("run", help="the whole app: servers, migrate, demo data, worker, daphne")
    run.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    run.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    exe = sub.add_parser("exec", help="run a command with the servers up and their URLs in its environment")
    exe.add_argument("--redis-db", type=int, default=None, help="use this logical Redis database")
    exe.add_argument("--keep", action="store_true", help="leave servers it started running")
    exe.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    handlers = {"up": cmd_up, "down": cmd_down, "status": cmd_status, "run": cmd_run, "exec": cmd_exec}
    try:
        return handlers[args.action](args)
    except ServiceError as exc:
        _say(str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main())
