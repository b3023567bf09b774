"""Redis out of reach for this test process only: a TCP proxy in front of the suite's Redis that a test
can cut (connections refused, open ones closed, as when Redis goes away) and restore.

The web side of the test (the consumer's channel layer, the event publisher, the Celery producer, the
assistant's own Redis client) is pointed at the proxy; the suite's Redis itself and the worker, which
talks to it directly, are never touched, so the services are left exactly as they were.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.test import override_settings


class CuttableProxy:
    """Forwards 127.0.0.1:<port> to `target` until cut."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="redis-proxy").start()

    def cut(self) -> None:
        """New connections are refused and open ones end at once, as if Redis had gone away."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, set()
        if listener is not None:
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        self.start()  # the same port again

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # cut
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):  # one side was cut or closed: the copy ends, both are shut below
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}"))


def _point_celery_at(app: Any, url: str) -> None:
    """Celery caches its broker connection pool and producers (kombu keeps them per URL): let go of them,
    unclosed, so that the next publish uses `url`, and the earlier pool is found again on the way back."""
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.broker_url = url


@contextlib.contextmanager
def redis_through_proxy() -> Iterator[CuttableProxy]:
    """This process reaches Redis through a CuttableProxy for the duration."""
    from config.celery import app

    parts = urlsplit(str(settings.REDIS_URL))
    proxy = CuttableProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    proxy.start()
    url = _with_port(str(settings.REDIS_URL), proxy.port)
    layers = {alias: {**layer, "CONFIG": {**layer.get("CONFIG", {}), "hosts": [url]}}
              for alias, layer in settings.CHANNEL_LAYERS.items()}
    broker = app.conf.broker_url
    try:
        with override_settings(REDIS_URL=url, CHANNEL_LAYERS=layers):
            _point_celery_at(app, url)
            yield proxy
    finally:
        _point_celery_at(app, broker)
        proxy.cut()
