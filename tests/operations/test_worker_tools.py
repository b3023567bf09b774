"""A worker loads the project's tools once, when it starts: one started before a new tool was added offers the
old set until it restarts. The site's processes each say which tools their code declares (in the assistant's
Redis), so the stale worker's own log, `manage.py check` (assistant.W026) and /healthz say to restart it.

Real processes throughout: a Celery worker started on the suite's settings (the old code), and `manage.py
check` and daphne on `tests.settings_new_tool` (the same code with one more tool, tests/newtool)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import pytest

from devstack.commands import daphne_command
from tests.conftest import (
    PROJECT_DIR,
    WorkerProcess,
    _accepts,
    _test_database_url,
    log_tail,
    site_worker,
    stop_every_sweeper,
    stop_process,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

NEW_TOOL = "newtool_effect_list"
OLD_CODE, NEW_CODE = "tests.settings", "tests.settings_new_tool"
HEALTH_TOKEN = "tools-health-token"


@pytest.fixture
def environment(django_db_blocker: Any) -> Iterator[dict[str, str]]:
    """The environment of this test's processes (the test database), with no other worker sweeping it, and
    nothing left in Redis of what earlier processes declared."""
    from assistant.infra.redis_connection import redis_client
    from assistant.operations.health import WEB_TOOLS_KEY

    stop_every_sweeper()
    client = redis_client()
    for key in client.scan_iter("assistant:health:tools:*"):
        client.delete(key)
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    yield {**os.environ, "DATABASE_URL": database_url, "ASSISTANT_HEALTH_TOKEN": HEALTH_TOKEN}
    # The new code's web process was the last to start: the suite's next worker is older than it.
    client.delete(WEB_TOOLS_KEY)


def start_worker(environment: dict[str, str], code: str, name: str) -> WorkerProcess:
    worker = site_worker({**environment, "DJANGO_SETTINGS_MODULE": code}, f"{name}-{os.getpid()}")
    worker.log.unlink(missing_ok=True)
    worker.start()
    assert worker.process is not None
    # The positive sign that it has said which tools it declares: its entry is there.
    process = f"{socket.gethostname()}:{worker.process.pid}"
    try:
        wait_for(lambda: process in published_workers(), what=f"the worker {name} to say which tools it declares")
    except BaseException:  # not left running: it would go on offering its tools to the next test
        worker.stop()
        raise
    return worker


def published_workers() -> set[str]:
    from assistant.operations.health import workers_tools

    return {declared.process for declared in workers_tools()}


def check(environment: dict[str, str], code: str) -> str:
    completed = subprocess.run([sys.executable, "manage.py", "check"], cwd=PROJECT_DIR, capture_output=True,
                               text=True, timeout=120, env={**environment, "DJANGO_SETTINGS_MODULE": code})
    return completed.stdout + completed.stderr


def tool_warnings(output: str) -> list[str]:
    """The W026 messages of a check's output, each with its hint."""
    return re.findall(r"\(assistant\.W026\).*?(?=\n\S|\Z)", output, re.DOTALL)


def healthz(port: int) -> dict[str, Any]:
    request = Request(f"http://127.0.0.1:{port}/healthz", headers={"Authorization": f"Bearer {HEALTH_TOKEN}"})
    try:
        with urlopen(request, timeout=10) as response:
            return dict(json.loads(response.read()))
    except OSError as error:  # a 503 is an answer too: its body says which part failed
        body = getattr(error, "read", None)
        if body is None:
            raise
        return dict(json.loads(body()))


def start_daphne(environment: dict[str, str], code: str, log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with log_path.open("wb") as log:
        server = subprocess.Popen(daphne_command(sys.executable, host="127.0.0.1", port=port), cwd=PROJECT_DIR,
                                  env={**environment, "DJANGO_SETTINGS_MODULE": code}, stdout=log,
                                  stderr=subprocess.STDOUT)
    wait_for(lambda: _accepts(port) or server.poll() is not None, what="daphne to listen")
    assert server.poll() is None, log_tail(log_path)
    return server, port


def test_a_worker_started_before_a_new_tool_is_told_to_restart_by_its_log_check_and_healthz(
    environment: dict[str, str], tmp_path: Path
) -> None:
    old_worker = start_worker(environment, OLD_CODE, "tools-old")
    try:
        # The code as it is now declares a tool the running worker does not offer.
        (warning,) = tool_warnings(check(environment, NEW_CODE))
        assert NEW_TOOL in warning and "restart" in warning.lower(), warning
        assert f"{socket.gethostname()}:{old_worker.process.pid}" in warning  # type: ignore[union-attr]
        # The same code as the worker's: nothing to say (so the warning above was the difference).
        assert tool_warnings(check(environment, OLD_CODE)) == []

        # A web process starts on the new code: the worker's log says it runs older code and must restart.
        server, port = start_daphne(environment, NEW_CODE, tmp_path / "daphne.log")
        try:
            told = wait_for(lambda: re.search(r".*runs older code.*", old_worker.log.read_text()),
                            what="the old worker to say that it runs older code")
            line = told.group(0)
            assert NEW_TOOL in line and "restart" in line.lower(), line

            # /healthz: the tools part names the stale worker; the site still answers (the rest is up).
            body = healthz(port)
            assert body["tools"]["ok"] is False and NEW_TOOL in body["tools"]["error"], body
            assert body["ok"] is True, body
        finally:
            stop_process(server)
    finally:
        old_worker.stop()

    # Restarted on the new code, the worker offers what the code declares: nothing left to say.
    new_worker = start_worker(environment, NEW_CODE, "tools-new")
    try:
        assert tool_warnings(check(environment, NEW_CODE)) == []
        assert "runs older code" not in new_worker.log.read_text()
    finally:
        new_worker.stop()
