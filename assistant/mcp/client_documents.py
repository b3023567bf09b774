"""Client ID metadata documents: how a hosted agent says who it is without registering (the way MCP 2026-07-28
prefers; dynamic registration stays for older clients).

The agent's `client_id` is an https URL, and the JSON document there names it and lists its redirect URIs. The
consent page fetches it (only for a person signed in on this site, so nobody else can make the site fetch) and
keeps it as django-mcpz's client row, which the rest of the flow (the consent, the token endpoint) then uses.
Fetching a URL a stranger chose is guarded:

- https only, to a host that resolves to public addresses only, connected to at the address checked (a second
  lookup could answer otherwise); under DEBUG, a loopback host too, over http or https (a client in development);
- at most `MAX_REDIRECTS` redirects, each checked as the first URL was; `TIMEOUT_SECONDS` for all of it, however
  slowly the server sends; at most `MAX_BYTES`;
- the document is a JSON object whose `client_id` is exactly the URL, with a `client_name` (at most 200
  characters), 1 to `MAX_REDIRECT_URIS` redirect URIs (https, or http to a loopback host, no fragment), no
  secret (a public client: `token_endpoint_auth_method` "none"), and no NUL anywhere;
- it is kept for what its `Cache-Control` says (`max-age`; nothing for `no-store` or `no-cache`), at most
  `MAX_CACHE_SECONDS`, `DEFAULT_CACHE_SECONDS` when it says nothing; a document that cannot be fetched or is
  refused is never kept, and the authorization is refused saying why.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import ipaddress
import json
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from django.conf import settings
from django.utils import timezone
from django_mcpz.oauth import cimd
from django_mcpz.oauth.conf import LOCAL_HOSTS
from django_mcpz.oauth.models import URL_MAX_LENGTH, Client

from assistant.infra.redis_connection import redis_client
from assistant.tools.validation import holds_nul

TIMEOUT_SECONDS = 5.0
MAX_BYTES = 16 * 1024
MAX_REDIRECTS = 3
MAX_REDIRECT_URIS = 10
MAX_CLIENT_NAME_CHARS = 200
# Below django-mcpz's own lifetime for a fetched document, so that it never fetches one itself (by its rules,
# which know nothing of DEBUG's loopback clients) while this module still counts it as fresh.
MAX_CACHE_SECONDS = cimd.CACHE_LIFETIME_SECONDS - 60
DEFAULT_CACHE_SECONDS = 300
_REDIRECTS = (301, 302, 303, 307, 308)
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?\s*(?:,|$)", re.IGNORECASE)


class DocumentRefused(Exception):
    """The client's metadata document could not be fetched, or is not one this site takes; says why."""


def _loopback_allowed() -> bool:
    return bool(settings.DEBUG)


def is_document_url(client_id: str) -> bool:
    """Whether the client_id names a metadata document: an https URL with a path (under DEBUG, also http to a
    loopback host), no fragment and no credentials, within the length a client row holds."""
    try:
        parts = urlsplit(client_id)
        host = parts.hostname
    except ValueError:
        return False
    secure = parts.scheme == "https" or (parts.scheme == "http" and _loopback_allowed() and host in LOCAL_HOSTS)
    return (secure and bool(host) and len(client_id) <= URL_MAX_LENGTH and parts.path not in ("", "/")
            and not parts.fragment and parts.username is None and parts.password is None)


def metadata_client(client_id: str) -> Client:
    """The client a metadata document URL names, from the document kept, or fetched and checked now.
    Raises DocumentRefused."""
    fresh_key = f"assistant:oauth-client-document:{hashlib.sha256(client_id.encode()).hexdigest()}"
    client = Client.objects.filter(client_id=client_id, kind=Client.Kind.METADATA).first()
    if client is not None and redis_client().exists(fresh_key):
        return client
    fetched = _fetch(client_id)
    document = _checked(fetched.body, client_id)
    client, _ = Client.objects.update_or_create(client_id=client_id, defaults={
        "kind": Client.Kind.METADATA, "name": document["client_name"], "redirect_uris": document["redirect_uris"],
        "fetched_at": timezone.now()})
    if fetched.keep_seconds > 0:
        redis_client().set(fresh_key, 1, ex=fetched.keep_seconds)
    return client


@dataclass(frozen=True)
class _Fetched:
    body: bytes
    keep_seconds: int


def _addresses(host: str, port: int) -> list[str]:
    """The addresses to connect to, in the resolver's order: every address the host resolves to must be public
    (under DEBUG, loopback ones are taken too), so that the document's URL cannot reach the site's own network."""
    try:
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except OSError:
        raise DocumentRefused(f"Its host {host} could not be resolved.") from None
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if not (address.is_global or (address.is_loopback and _loopback_allowed())):
            raise DocumentRefused(f"Its host {host} is not on the public internet.")
    return [str(sockaddr[0]) for *_, sockaddr in found]


class _PinnedConnection(http.client.HTTPConnection):
    """A connection to one of the addresses checked beforehand (the first that answers, as a browser tries a
    name's addresses), over TLS checked against the host's name when given."""

    def __init__(self, host: str, port: int, addresses: list[str], tls: ssl.SSLContext | None,
                 timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.addresses, self.tls = addresses, tls

    def connect(self) -> None:
        failed: OSError = OSError(f"no address of {self.host}")
        for address in self.addresses:
            try:
                sock = socket.create_connection((address, self.port), self.timeout)
            except OSError as refused:
                failed = refused
                continue
            self.sock = self.tls.wrap_socket(sock, server_hostname=self.host) if self.tls is not None else sock
            return
        raise failed


def _keep_seconds(cache_control: str) -> int:
    directives = cache_control.lower()
    if "no-store" in directives or "no-cache" in directives:
        return 0
    found = _MAX_AGE.search(directives)
    return min(int(found.group(1)), MAX_CACHE_SECONDS) if found else DEFAULT_CACHE_SECONDS


def _fetch(url: str) -> _Fetched:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    for _hop in range(MAX_REDIRECTS + 1):
        if not is_document_url(url):
            raise DocumentRefused("It is not an https URL with a path.")
        status, location, fetched = _get(url, deadline)
        if status not in _REDIRECTS:
            if status != 200:
                raise DocumentRefused(f"It answered {status}, not 200.")
            return fetched
        if not location:
            raise DocumentRefused(f"It answered {status} without a Location.")
        url = urljoin(url, location)
    raise DocumentRefused(f"It redirected more than {MAX_REDIRECTS} times.")


def _get(url: str, deadline: float) -> tuple[int, str, _Fetched]:
    """One GET of `url`, not following a redirect: (status, Location, the body and how long it may be kept)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = _addresses(host, port)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DocumentRefused(f"It took longer than {TIMEOUT_SECONDS:g} seconds.")
    tls = ssl.create_default_context() if parts.scheme == "https" else None
    connection = _PinnedConnection(host, port, addresses, tls, remaining)
    # A socket timeout bounds each read, not the whole answer: a server sending a byte at a time could hold the
    # request for hours. The timer shuts the connection at the deadline instead.
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        with contextlib.suppress(OSError, AttributeError):
            connection.sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(remaining, expire)
    timer.start()
    try:
        connection.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), headers={
            "Accept": "application/json", "Accept-Encoding": "identity", "User-Agent": "django-inapp-assistant"})
        response = connection.getresponse()
        if response.status in _REDIRECTS:
            return response.status, response.getheader("Location") or "", _Fetched(b"", 0)
        declared = response.getheader("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BYTES:
            raise DocumentRefused(f"It is larger than {MAX_BYTES // 1024} KB.")
        body = response.read(MAX_BYTES + 1)
        if len(body) > MAX_BYTES:
            raise DocumentRefused(f"It is larger than {MAX_BYTES // 1024} KB.")
        if expired.is_set():
            raise DocumentRefused(f"It took longer than {TIMEOUT_SECONDS:g} seconds.")
        return response.status, "", _Fetched(body, _keep_seconds(response.getheader("Cache-Control") or ""))
    except (OSError, http.client.HTTPException) as failed:
        if expired.is_set() or isinstance(failed, TimeoutError):
            raise DocumentRefused(f"It took longer than {TIMEOUT_SECONDS:g} seconds.") from None
        raise DocumentRefused(f"It could not be fetched ({type(failed).__name__}).") from None
    finally:
        timer.cancel()
        connection.close()


def _checked(body: bytes, url: str) -> dict[str, Any]:
    """The document, if it is one this site takes (see the module's docstring); DocumentRefused says why not."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise DocumentRefused("It is not JSON.") from None
    if not isinstance(document, dict):
        raise DocumentRefused("It is not a JSON object.")
    if document.get("client_id") != url:
        raise DocumentRefused("Its client_id is not its own URL.")
    if holds_nul(document):
        raise DocumentRefused("It holds a NUL character.")
    name, uris = document.get("client_name"), document.get("redirect_uris")
    if isinstance(name, str) and len(name) > MAX_CLIENT_NAME_CHARS:
        raise DocumentRefused(f"Its client_name is longer than {MAX_CLIENT_NAME_CHARS} characters.")
    if isinstance(uris, list) and len(uris) > MAX_REDIRECT_URIS:
        raise DocumentRefused(f"It lists more than {MAX_REDIRECT_URIS} redirect_uris.")
    if "client_secret" in document or "client_secret_expires_at" in document:
        raise DocumentRefused("It holds a client secret, which a metadata document must not.")
    try:
        # django-mcpz's own rules: a name, redirect URIs safe to send a code to, a public client.
        return cimd.validate_document(document, url)
    except cimd.MetadataError as refused:
        raise DocumentRefused(str(refused)) from None
