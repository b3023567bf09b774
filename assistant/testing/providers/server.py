"""The HTTP plumbing shared by the fake provider servers."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The servers listen on loopback only: a test's fake provider is no one else's.
LOOPBACK = "127.0.0.1"


@dataclass
class Reply:
    """One answer: `json` as a body, or `sse` as (event name or None, data) pairs streamed in order."""

    status: int = 200
    json: Any = None
    sse: list[tuple[str | None, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    #: Seconds between streamed events, to imitate a model that is still writing.
    sse_interval: float = 0.0


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


def error_reply(
    status: int, message: str = "fake error", *, headers: dict[str, str] | None = None, delay: float = 0.0
) -> Reply:
    return Reply(
        status=status,
        json={"error": {"message": message, "type": "fake_error"}},
        headers=dict(headers or {}),
        delay=delay,
    )


class FakeServer:
    """A threaded HTTP server on a free loopback port; use as a context manager."""

    path = "/"
    #: Why a body that `read_body` could not make a dict of is refused.
    unreadable = "not a JSON object"

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # What subclasses provide.
    def read_body(self, raw: bytes, headers: dict[str, str]) -> Any:
        """The request's body as `validate` and the recorded requests see it: JSON, or else its text."""
        try:
            return json.loads(raw or b"null")
        except json.JSONDecodeError:
            return raw.decode(errors="replace")

    def validate(self, body: Any, headers: dict[str, str]) -> str | None:
        """Why the real API would refuse this request, or None."""
        return None

    def default_reply(self, body: Any) -> Reply:
        return Reply(json={})

    def bad_request(self, message: str) -> Reply:
        return error_reply(400, message)

    # Control.
    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        return f"http://{LOOPBACK}:{self._httpd.server_port}"

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order; then the default reply."""
        with self._lock:
            self._replies.extend(replies)

    def reset(self) -> None:
        """Forget recorded requests and queued replies (a server shared by several tests)."""
        with self._lock:
            self.requests.clear()
            self._replies.clear()

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]

    def start(self) -> FakeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with Nagle on, the second waits for the
            # client's delayed ACK (~40 ms), which would swamp every timing taken against this server.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return  # keep test output clean

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                headers = {key.lower(): value for key, value in self.headers.items()}
                body = server.read_body(raw, headers)
                with server._lock:
                    server.requests.append(Recorded(self.path, headers, body))
                if self.path.split("?")[0] != server.path:
                    reply = error_reply(404, f"no route {self.path}")
                elif problem := (server.validate(body, headers) if isinstance(body, dict) else server.unreadable):
                    reply = server.bad_request(problem)
                else:
                    with server._lock:
                        queued = server._replies.popleft() if server._replies else None
                    reply = queued or server.default_reply(body)
                try:
                    server._send(self, reply)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (a timeout test)

        self._httpd = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        handler.send_response(reply.status)
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        if reply.sse is not None:
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Cache-Control", "no-cache")
            handler.send_header("Connection", "close")
            handler.end_headers()
            for event, data in reply.sse:
                chunk = f"event: {event}\n" if event else ""
                chunk += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
                try:
                    handler.wfile.write(chunk.encode())
                    handler.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    break  # the client stopped reading (a cancelled run): that is its right
                if reply.sse_interval:
                    time.sleep(reply.sse_interval)
            handler.close_connection = True
            return
        payload = json.dumps(reply.json if reply.json is not None else {}).encode()
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


def split_text(text: str, pieces: int) -> list[str]:
    """`text` cut into about `pieces` consecutive fragments (how streams deliver JSON arguments)."""
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]
