"""`devstack status` (and every later command) finds the Valkey that `devstack up` started on a port of the
person's choosing (VALKEY_PORT), without being told the port again."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.services import Paths, stop_services
from tests.conftest import PROJECT_DIR


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "data"
    yield folder
    stop_services(Paths(folder))


def devstack(data: Path, *args: str, **environment: str) -> str:
    """`python -m devstack ARGS` on the data folder `data`, as a person runs it: REDIS_URL and VALKEY_PORT unset
    unless given, and a DATABASE_URL of its own, so that no PostgreSQL is started."""
    env = {key: value for key, value in os.environ.items() if key not in {"REDIS_URL", "VALKEY_PORT"}}
    env |= {"ASSISTANT_DATA_DIR": str(data), "DATABASE_URL": "postgresql://someone@db.internal/theirs", **environment}
    completed = subprocess.run([sys.executable, "-m", "devstack", *args], cwd=PROJECT_DIR, env=env,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_status_finds_the_valkey_up_started_on_another_port(data: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    assert f"REDIS_URL=redis://127.0.0.1:{port}/0" in devstack(data, "up", VALKEY_PORT=str(port))

    assert f"valkey: redis://127.0.0.1:{port}/0" in devstack(data, "status")
    # A later command reuses it rather than starting a second server on the same data folder.
    assert "started now: postgresql=False valkey=False" in devstack(data, "up")

    stop_services(Paths(data))
    assert "valkey: not running" in devstack(data, "status")
