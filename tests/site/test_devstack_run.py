"""`make run` end to end: the whole app comes up on its own embedded servers, serves a login, and
Ctrl-C brings every process down."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from devstack.services import Paths, port_is_free, status, stop_services
from tests.conftest import PROJECT_DIR


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_run(data: Path, port: int, valkey_port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(ASSISTANT_DATA_DIR=str(data), VALKEY_PORT=str(valkey_port), PORT=str(port))
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "devstack", "run"], cwd=PROJECT_DIR, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )


def wait_for_text(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = log.read_text(errors="replace")
        if text in output:
            return output
        if process.poll() is not None:
            pytest.fail(f"devstack run exited with {process.returncode}:\n{output[-3000:]}")
        time.sleep(0.3)
    pytest.fail(f"{text!r} did not appear within {timeout}s:\n{log.read_text(errors='replace')[-3000:]}")


def log_in(base: str, username: str, password: str) -> str:
    """Log in through the real login form, as a browser would; returns the home page's HTML."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    form = opener.open(base + "login/", timeout=10).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
    body = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
    request = urllib.request.Request(base + "login/", data=body.encode(), headers={"Referer": base + "login/"})
    return opener.open(request, timeout=10).read().decode()


@pytest.mark.timeout(240)
def test_make_run_serves_the_app_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    data, port, valkey_port, log = tmp_path / "data", free_port(), free_port(), tmp_path / "run.log"
    process = start_run(data, port, valkey_port, log)
    try:
        output = wait_for_text(log, "Press Ctrl-C to stop everything", process, timeout=180)
        base = f"http://127.0.0.1:{port}/"
        assert f"The app is running at {base}" in output
        assert "alice  / alice-demo" in output and "staff  / staff-demo" in output

        with urllib.request.urlopen(base + "healthz", timeout=10) as response:
            health = json.load(response)
        assert health["ok"] is True, health

        home = log_in(base, "alice", "alice-demo")
        assert "Welcome, alice" in home
        assert "assistant-launcher" in home
    finally:
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        process.wait(timeout=60)
    assert process.returncode == 0, log.read_text()[-3000:]
    assert port_is_free("127.0.0.1", port)
    assert status(Paths(data)) == {"postgresql": None, "valkey": None}


def test_a_taken_site_port_ends_with_a_clear_message_and_starts_nothing(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "run.log"
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        process = start_run(data, port, free_port(), log)
        try:
            process.wait(timeout=30)
        finally:
            stop_services(Paths(data))
    assert process.returncode == 1
    assert f"Port {port} on 127.0.0.1 is already in use" in log.read_text()
    assert status(Paths(data)) == {"postgresql": None, "valkey": None}
