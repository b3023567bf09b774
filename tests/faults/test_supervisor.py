"""`python -m devstack run` (what `make run` starts) keeps the site up when one of its processes dies:
the process is started again and the site goes on answering, while the others are never stopped."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR, _test_database_url, stop_every_sweeper
from tests.faults.stack import Socket, Valkey, free_port, tail

pytestmark = pytest.mark.django_db(transaction=True)


class Run:
    """`python -m devstack run` on the test database and a Valkey of its own (so it starts no embedded
    server and its worker never takes the suite's tasks)."""

    def __init__(self, directory: Path, valkey: Valkey) -> None:
        self.port = free_port()
        self.log = directory / "run.log"
        inherited = {"DJANGO_SETTINGS_MODULE", "ASSISTANT_MODEL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}
        env = {key: value for key, value in os.environ.items() if key not in inherited}
        env.update(DATABASE_URL=_test_database_url(), REDIS_URL=valkey.url, PORT=str(self.port))
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "devstack", "run"], cwd=PROJECT_DIR, env=env, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_output(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            assert self.process.poll() is None, f"devstack run exited with {self.process.returncode}:\n{tail(self.log)}"
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} did not appear within {timeout}s:\n{tail(self.log)}")

    def child_pid(self, marker: str) -> int:
        """The pid of the supervisor's child whose command line contains `marker`."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, IndexError, ValueError):
                continue  # a process that ended while we looked
            if parent == self.process.pid and marker in command:
                return int(entry.name)
        raise AssertionError(f"no child running {marker!r}:\n{tail(self.log)}")

    def stop(self) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        return self.process.wait(timeout=60)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    # The other workers sweep the same database and could take this site's run (queued while its own
    # worker restarts) onto their brokers; they are stopped (the next test that needs one starts it again).
    stop_every_sweeper()
    valkey = Valkey(tmp_path / "valkey")
    valkey.start()
    started = Run(tmp_path, valkey)
    try:
        yield started
    finally:
        started.stop()
        valkey.stop()


def log_in(base: str, username: str, password: str) -> str:
    """Log in through the real form, as a browser would; returns the session cookie."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(base + "login/", timeout=10).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
    body = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
    opener.open(urllib.request.Request(base + "login/", data=body.encode(), headers={"Referer": base + "login/"}),
                timeout=10)
    return next(cookie.value for cookie in jar if cookie.name == "sessionid")  # type: ignore[misc]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:  # noqa: S310 (loopback)
            return bool(response.status == 200)
    except OSError:
        return False


def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.timeout(180)
def test_a_killed_process_is_restarted_and_the_site_keeps_answering(run: Run) -> None:
    run.wait_for_output("Press Ctrl-C to stop everything", timeout=120)
    worker_before = run.child_pid("celery")

    os.kill(run.child_pid("daphne"), signal.SIGKILL)
    run.wait_for_output(r"daphne was killed by SIGKILL after \d+s; restarting it in 1s", timeout=10)
    run.wait_for_output(r"daphne restarted", timeout=10)
    wait_until(lambda: answers(run.base + "login/"), timeout=30, what="the restarted daphne to serve")
    assert run.child_pid("celery") == worker_before  # daphne's death left the worker alone

    os.killpg(worker_before, signal.SIGKILL)  # the worker and its pool, as the OOM killer would
    run.wait_for_output(r"worker was killed by SIGKILL after \d+s; restarting it in 1s", timeout=10)
    run.wait_for_output(r"worker restarted", timeout=10)
    assert run.child_pid("celery") != worker_before

    # The site still does its job end to end: a person logs in, asks, and the restarted worker answers.
    page = Socket(run.port, log_in(run.base, "alice", "alice-demo")).connect()
    sent = page.send_message("what are my open tasks?")
    assert sent["type"] == "assistant.sent", sent
    replied = page.wait_for(lambda event: event["type"] in {"assistant.replied", "assistant.reply_failed"}, timeout=60)
    assert replied["type"] == "assistant.replied", replied
    page.close()
    wait_until(lambda: answers(run.base + "healthz"), timeout=20, what="/healthz to report the site healthy")

    assert run.process.poll() is None
    assert run.stop() == 0, tail(run.log)
    assert "stopping everything" not in run.output()
