"""A URL too long for daphne gets an answer, 414 URI Too Long, instead of a dropped connection.

Twisted, under daphne, hangs up without a word on a request line past 16 KiB, before the site sees the
request; `make run` starts daphne through `devstack.daphne`, which answers it instead (see its docstring).
These tests talk to that daphne over real sockets on loopback.
"""

from __future__ import annotations

import http.client


def request(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        client.request("GET", path, headers=headers or {})
        response = client.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        client.close()


def test_a_100_kb_url_is_answered_414_with_a_short_body_and_the_server_goes_on_serving(port: int) -> None:
    status, headers, body = request(port, "/tracker/tasks/?search=" + "a" * 100_000)

    assert status == 414
    assert headers["Connection"] == "close"
    assert 0 < len(body) < 200 and b"longer than" in body
    # The same server, a new connection: an ordinary page as before.
    status, _, body = request(port, "/login/")
    assert status == 200 and b"<form" in body


def test_a_url_just_within_the_limit_still_reaches_the_site(port: int) -> None:
    """The limit is Twisted's own (16 KiB a line): a long URL below it is the site's to answer."""
    status, _, _ = request(port, "/login/?next=/" + "a" * 15_000)
    assert status == 200


def test_a_header_line_too_long_is_answered_431(port: int) -> None:
    status, _, body = request(port, "/login/", headers={"X-Filler": "b" * 20_000})

    assert status == 431
    assert 0 < len(body) < 200
    assert request(port, "/login/")[0] == 200
