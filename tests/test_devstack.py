"""The embedded-services starter: starts, notices a running server, stops, and fails clearly on a taken port."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from devstack.services import (
    Paths,
    ServiceError,
    ensure_services,
    read_env_file,
    start_postgres,
    start_valkey,
    status,
    stop_services,
    with_redis_db,
)


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
