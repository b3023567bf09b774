"""A real Celery worker for a project's tests: a run's turns are taken by a worker, not by the test's process
(see docs/testing.md), so a test that chats needs one on its test database.

`WorkerProcess("mysite", env, "test-worker", log)` is `celery -A mysite worker` in a process group of its own,
its output appended to `log`; `env` is its whole environment, with the settings that name the test database and
the broker the test sends to. `start()` returns once the worker takes tasks; a test may then `stop()` it as a
process manager would, `kill()` it with everything it forked as a crash would, or `restart()` it, and wait until
it has nothing left to do (`wait_idle()`, `caught_up()`). `ServiceProcess`, its base, runs any other server a
test needs the same way (a Redis of the test's own, daphne).

Only the standard library is imported until a test asks the worker what it runs (`wait_idle`, `caught_up`),
which asks the project's Celery app in the test's process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar


class ServiceProcess:
    """A long-running command in a process group of its own, so that a kill reaches whatever it forked, with its
    output appended to a log file."""

    def __init__(
        self, name: str, command: Sequence[str], env: Mapping[str, str], log: str | os.PathLike[str], *,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name, self.command, self.env, self.log, self.cwd = name, list(command), dict(env), Path(log), cwd
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(  # noqa: S603 (the command a test gave)
                self.command, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output_since_start(self) -> str:
        """What it printed since it was last started (the log keeps earlier starts' output too)."""
        if not self.log.exists():
            return ""
        with self.log.open("rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")

    def log_tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_for_output(self, text: str, timeout: float) -> None:
        """Until it prints `text`; an AssertionError with the end of its log if it exits or does not in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output_since_start():
                return
            if not self.alive:
                raise AssertionError(f"{self.name} exited with {self.exit_code()}:\n{self.log_tail()}")
            time.sleep(0.05)
        raise AssertionError(f"{self.name} did not print {text!r} within {timeout:.0f}s:\n{self.log_tail()}")

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM, as a process manager stops a service (a Celery worker finishes the tasks it runs, then ends
        its pool); SIGKILL to its whole group if it has not gone within `timeout` seconds."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the process and everything it forked at once, as a crash or the OOM killer would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class WorkerProcess(ServiceProcess):
    """`celery -A <app> worker`, named `<name>@<this host>`, with a prefork pool of `concurrency` processes.

    Every worker on a database sweeps it for lost runs and takes them up, so a test that needs its runs taken by
    one worker alone stops the others first: `running` holds the workers this test process started and has not
    stopped since, and `stop_all()` stops them."""

    running: ClassVar[set[WorkerProcess]] = set()

    def __init__(
        self, app: str, env: Mapping[str, str], name: str, log: str | os.PathLike[str], *,
        cwd: str | os.PathLike[str] | None = None, concurrency: int = 2,
    ) -> None:
        # A worker of the test's own has no neighbours to synchronise with: without gossip and mingle it starts
        # a second sooner.
        command = [sys.executable, "-m", "celery", "-A", app, "worker", "--loglevel", "INFO",
                   "--concurrency", str(concurrency), "--hostname", f"{name}@%h", "--without-gossip",
                   "--without-mingle"]
        super().__init__(name, command, env, log, cwd=cwd)

    @property
    def hostname(self) -> str:
        return f"{self.name}@{socket.gethostname()}"

    def start(self, timeout: float = 60) -> None:
        """Start it and return once it takes tasks: it logs "<hostname> ready." (at INFO) when it does. Its own
        broker may be any: nothing is asked of the test's."""
        super().start()
        try:
            self.wait_for_output(" ready.", timeout)
        except AssertionError:
            self.kill()
            raise
        WorkerProcess.running.add(self)

    def stop(self, timeout: float = 15) -> None:
        WorkerProcess.running.discard(self)
        super().stop(timeout)

    def kill(self) -> None:
        WorkerProcess.running.discard(self)
        super().kill()

    def restart(self) -> None:
        self.stop()
        self.start()

    @classmethod
    def stop_all(cls, *, keep: WorkerProcess | None = None) -> None:
        """Stop every worker this test process started, but `keep`."""
        for worker in list(cls.running):
            if worker is not keep:
                worker.stop()

    def wait_idle(self, timeout: float = 30) -> None:
        """Until the worker runs no task: a test's database is emptied after it, and a run still writing then
        would deadlock the emptying or leave rows for the next test. Asked through the test's Celery app, so
        the worker must be on the test's broker."""
        from celery import current_app

        if not self.alive:
            return
        # Asked of this worker alone and taking its one reply: asked of every worker, the question waits its
        # whole timeout for replies that never come, a second at the end of every test.
        inspect = current_app.control.inspect(destination=[self.hostname], limit=1, timeout=1.0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            replies = inspect.active() or {}
            if not replies.get(self.hostname):
                return
            time.sleep(0.1)
        raise AssertionError(f"the worker {self.name} was still busy after {timeout:.0f}s")

    def caught_up(self, timeout: float = 30) -> None:
        """Until the worker has run every task queued before this call, the positive sign a check that a queued
        task did nothing needs first (a fixed wait passes unchecked when the worker is slow).

        A probe task queued now is answered: the broker's queue is first in, first out, so the worker has taken
        every earlier task by then; and then it has none running or waiting for a pool process. Like
        `wait_idle`, through the test's Celery app."""
        from celery import current_app

        # A project's conftest imports this module before Django is set up; assistant.tasks imports the models.
        from assistant.tasks import health_check

        health_check.delay("caught up").get(timeout=timeout)
        inspect = current_app.control.inspect(destination=[self.hostname], limit=1, timeout=5)
        deadline = time.monotonic() + timeout
        while True:
            active, reserved = inspect.active(), inspect.reserved()
            # None is no reply yet: ask again.
            if (active is not None and reserved is not None
                    and not active.get(self.hostname) and not reserved.get(self.hostname)):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the worker {self.name} had not caught up after {timeout:.0f}s: "
                                     f"{[active, reserved]}")
            time.sleep(0.1)
