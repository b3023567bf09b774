"""`python -m devstack.daphne ARGS`: daphne, run exactly as `daphne ARGS` runs it, except that a request whose
request line (or one header line) is longer than Twisted reads gets an answer instead of silence.

Twisted's HTTP channel reads the request head line by line and hangs up without a word on a line past
16 KiB (`LineReceiver.MAX_LENGTH`; daphne keeps Twisted's limits): a request with a 100 KB URL never
becomes a request to daphne, let alone to the ASGI application, so nothing in the site can answer it.
Here the channel answers such a request line `414 URI Too Long` (a header line, `431 Request Header
Fields Too Large`), reads the rest of the request head and throws it away (so that a client still
sending it sees the answer rather than a reset), and closes the connection. Everything else is daphne's
and Twisted's own: the same limits, HTTP/1.1 and websockets on the ports daphne is told to listen on.

In production the same answer comes from whatever is in front of daphne (a reverse proxy or load
balancer bounds the request line and answers 414 itself), or from running daphne through this module.
"""

from __future__ import annotations

import sys
from typing import Any

from daphne.cli import CommandLineInterface as DaphneCommandLine
from daphne.server import Server as DaphneServer
from twisted.web.http import HTTPChannel

#: After answering, at most this much more of the request is read (and thrown away) before hanging up.
DISCARD_LIMIT_BYTES = 1024 * 1024
_END_OF_HEAD = b"\r\n\r\n"


def _answer(status: bytes, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        b"Connection: close\r\n\r\n" + body
    )


class LineLimitChannel(HTTPChannel):
    """Twisted's HTTP/1.1 channel, answering a line too long to read instead of dropping the connection."""

    _discarding = False
    _discarded = 0
    _tail = b""

    def lineLengthExceeded(self, line: bytes) -> None:
        # Nothing of this request's head has been read yet when the request line is the long one.
        if self._receivedHeaderSize == 0:
            status, body = b"414 URI Too Long", f"The request line is longer than {self.MAX_LENGTH} bytes.\n"
        else:
            status, body = b"431 Request Header Fields Too Large", f"A header is longer than {self.MAX_LENGTH} bytes.\n"
        self._transport().write(_answer(status, body.encode()))
        self._discarding = True
        self._discard(line)

    def dataReceived(self, data: bytes) -> None:
        if self._discarding:
            self._discard(data)
            return
        super().dataReceived(data)

    def _discard(self, data: bytes) -> None:
        """Read the request head's remainder without keeping it; hang up at its end or past the limit."""
        self._discarded += len(data)
        seen = self._tail + data
        if _END_OF_HEAD in seen or self._discarded > DISCARD_LIMIT_BYTES:
            self._transport().loseConnection()
            return
        self._tail = seen[-(len(_END_OF_HEAD) - 1):]

    def _transport(self) -> Any:
        # Twisted declares its transports as zope interfaces, which type checkers cannot call through.
        return self.transport


class Server(DaphneServer):
    """daphne's server, whose HTTP factory builds `LineLimitChannel`s. daphne makes its factory when it
    starts running; the channel is set on it right then, before the reactor accepts a connection."""

    @property
    def http_factory(self) -> Any:
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory: Any) -> None:
        # Twisted's own factory wraps its channel in a proxy that can switch to HTTP/2 after a TLS
        # negotiation; on the plain TCP ports daphne listens on here, that proxy always keeps HTTP/1.1.
        factory.protocol = LineLimitChannel
        self._http_factory = factory


class CommandLineInterface(DaphneCommandLine):
    server_class = Server


def main(argv: list[str] | None = None) -> None:
    CommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
