"""A small OpenAI-compatible embeddings server on 127.0.0.1 for tests.

It answers `POST .../embeddings` with deterministic bag-of-words vectors (texts sharing words get
close vectors), records every request it receives, and can be told to fail with a status code.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


def bag_of_words_vector(text: str, dims: int) -> list[float]:
    """Counts of hashed lower-case words, deliberately not normalised (the client must do it)."""
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        bucket = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dims
        vector[bucket] += 1.0
    if not any(vector):
        vector[0] = 1.0
    return vector


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any


@dataclass
class FakeEmbeddingsServer:
    """Usage: `with FakeEmbeddingsServer(dims=16) as server: ... server.base_url ...`."""

    dims: int = 16
    fail_with: int | None = None  # an HTTP status to answer every request with, e.g. 500
    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "the server is not running"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> FakeEmbeddingsServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                headers = {name.lower(): value for name, value in self.headers.items()}
                server.requests.append(RecordedRequest(self.path, headers, body))
                if server.fail_with is not None:
                    self._reply(server.fail_with, {"error": {"message": "scripted failure", "type": "server"}})
                elif not self.path.endswith("/embeddings") or not isinstance(body, dict):
                    self._reply(404, {"error": {"message": f"no route {self.path}"}})
                else:
                    inputs = body.get("input")
                    inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
                    data = [
                        {"object": "embedding", "index": i, "embedding": bag_of_words_vector(text, server.dims)}
                        for i, text in enumerate(inputs)
                    ]
                    tokens = sum(len(str(text).split()) for text in inputs)
                    self._reply(200, {
                        "object": "list", "data": data, "model": body.get("model"),
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    })

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
