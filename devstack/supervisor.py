"""Keeps the site's processes (the Celery worker and daphne) running, as a process manager would.

A process that exits is started again after a pause that doubles with each quick failure (1 s, 2 s,
4 s, ... up to 30 s) and falls back to 1 s once it has stayed up for a while; the others are left
alone. Only Ctrl-C (or SIGTERM) stops everything.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
# A process that stayed up this long was healthy: its next failure is restarted after the first pause.
STEADY_SECONDS = 30.0


@dataclass
class Service:
    name: str
    command: list[str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = 0.0
    # Set while the service is down and waiting to be started again.
    restart_at: float | None = None


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Supervisor:
    def __init__(self, environ: dict[str, str], cwd: Path, say: Callable[[str], None]) -> None:
        self.environ, self.cwd, self.say = environ, cwd, say
        self.services: dict[str, Service] = {}
        self.stopping = False

    def spawn(self, name: str, command: list[str]) -> None:
        service = self.services.setdefault(name, Service(name, command))
        self._start(service)

    def _start(self, service: Service) -> None:
        # A session of its own: Ctrl-C reaches only the supervisor, which then stops children in order.
        service.process = subprocess.Popen(
            service.command, env=self.environ, cwd=self.cwd, start_new_session=True
        )
        service.started_at = time.monotonic()
        service.restart_at = None

    def exited(self) -> tuple[str, int] | None:
        """The first service found not running, with its exit code (used while starting up)."""
        for name, service in self.services.items():
            code = service.process.poll() if service.process is not None else None
            if code is not None:
                return name, code
        return None

    def tend(self) -> None:
        """Notice services that exited, and start those whose pause is over. Call it often."""
        now = time.monotonic()
        for service in self.services.values():
            assert service.process is not None
            code = service.process.poll()
            if code is None:
                continue
            if service.restart_at is None:
                up_for = now - service.started_at
                if up_for >= STEADY_SECONDS or not service.backoff:
                    service.backoff = FIRST_BACKOFF_SECONDS
                else:
                    service.backoff = min(MAX_BACKOFF_SECONDS, service.backoff * 2)
                service.restart_at = now + service.backoff
                self.say(
                    f"{service.name} {describe_exit(code)} after {up_for:.0f}s; restarting it in "
                    f"{service.backoff:.0f}s. The other processes keep running."
                )
            elif now >= service.restart_at:
                self._start(service)
                service.restarts += 1
                self.say(f"{service.name} restarted (restart {service.restarts}).")

    def stop(self, grace: float = 15.0) -> None:
        running = [service for service in self.services.values()
                   if service.process is not None and service.process.poll() is None]
        for service in running:
            assert service.process is not None
            service.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for service in running:
            assert service.process is not None
            try:
                service.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"{service.name} did not stop within {grace:.0f}s; killing it")
                service.process.kill()
                service.process.wait()
