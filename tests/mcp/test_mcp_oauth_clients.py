"""How a hosted agent becomes an OAuth client of the site (issue 32, item 4), through real HTTP to daphne:

- dynamic registration (RFC 7591, kept for older clients) is bounded — redirect URIs, the name, every other
  field, the body — each refusal in RFC 7591's error shape with nothing stored, and an address's registrations
  an hour are counted atomically (29 sent at once make exactly the limit's clients; the rest 429);
- a client ID metadata document (MCP 2026-07-28's preferred way) is fetched from a real local https server
  whose certificate the site trusts (and, the site being in DEBUG, over loopback), checked and kept: the official
  MCP SDK's client connects with one end to end; a document too big, too slow, redirecting too often, naming
  another client_id, or a redirect_uri it does not list, is refused on the consent page with nothing made.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.conf import settings
from django.test import override_settings
from django_mcpz.oauth.models import Client as OAuthClient
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from assistant.infra.redis_connection import redis_client
from assistant.mcp.client_documents import DocumentRefused, is_document_url, metadata_client
from assistant.mcp.models import AccessToken
from assistant.models import AgentRun
from tests.conftest import daphne_on_test_database
from tests.mcp.test_mcp_oauth import REDIRECT, Remembered, ThePersonsBrowser, authorization_url, pkce, session_of
from tracker.models import Project

pytestmark = pytest.mark.django_db(transaction=True)


# --- a local https server the site trusts, for the documents -------------------------------------------------


@dataclass
class Served:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds between each byte of the body (a server that sends as slowly as it can).
    drip: float = 0.0


class DocumentServer:
    """A threaded HTTP(S) server on a loopback port answering GETs with what `routes` says."""

    def __init__(self, tls: Any = None) -> None:
        self.routes: dict[str, Served] = {}
        self.gets: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def do_GET(self) -> None:  # noqa: N802
                server.gets.append(self.path)
                served = server.routes.get(self.path, Served(404, b"{}"))
                self.send_response(served.status)
                for name, value in {"Content-Type": "application/json", **served.headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(served.body)))
                self.end_headers()
                try:
                    if not served.drip:
                        self.wfile.write(served.body)
                        return
                    for byte in served.body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(served.drip)
                except OSError:
                    self.close_connection = True  # the site gave up on it: that is the point

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def url(self, path: str) -> str:
        host = "localhost" if self.scheme == "https" else "127.0.0.1"  # the certificate's name
        return f"{self.scheme}://{host}:{self.httpd.server_address[1]}{path}"

    def document(self, path: str, *, name: str = "Metadata Claude", redirect_uris: list[str] | None = None,
                 headers: dict[str, str] | None = None, **fields: Any) -> str:
        """Serve a client metadata document at `path`; returns its URL, the client_id."""
        url = self.url(path)
        body = {"client_id": url, "client_name": name, "redirect_uris": redirect_uris or [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                "token_endpoint_auth_method": "none", **fields}
        self.routes[path] = Served(body=json.dumps(body).encode(), headers=headers or {})
        return url


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A certificate authority (the file the site trusts) and localhost's certificate and key, signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test documents CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = directory / "ca.pem", directory / "localhost.pem", directory / "localhost.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return _certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def https(certificates: tuple[Path, Path, Path]) -> Iterator[DocumentServer]:
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates[1], certificates[2])
    server = DocumentServer(context)
    yield server
    server.httpd.shutdown()


@pytest.fixture
def documents(https: DocumentServer) -> DocumentServer:
    https.routes.clear()
    https.gets.clear()
    return https


@pytest.fixture(scope="module")
def port(django_db_setup: None, django_db_blocker: Any, certificates: tuple[Path, Path, Path]) -> Iterator[int]:
    # In development (DEBUG), with the test's authority trusted: the documents are served on this machine.
    env = {"DJANGO_DEBUG": "1", "SSL_CERT_FILE": str(certificates[0])}
    with daphne_on_test_database(django_db_blocker, env=env) as served:
        yield served


@pytest.fixture(autouse=True)
def nothing_counted_or_kept() -> Iterator[None]:
    """Registration windows and kept documents are the site's Redis state: each test starts without any."""

    def forget() -> None:
        client = redis_client()
        for key in [*client.scan_iter("assistant:oauth-registrations:*"),
                    *client.scan_iter("assistant:oauth-client-document:*")]:
            client.delete(key)

    forget()
    yield
    forget()


def consent_page(port: int, person: Any, client_id: str, redirect_uri: str = REDIRECT) -> httpx2.Response:
    """The person, signed in, opens the authorization request an app sent them to."""
    with httpx2.Client(cookies={settings.SESSION_COOKIE_NAME: session_of(person)}, timeout=30) as browser:
        return browser.get(authorization_url(port, client_id, redirect_uri, pkce()[1]))


def refused_page(answer: httpx2.Response, words: str) -> None:
    assert answer.status_code == 400, (answer.status_code, answer.text[:1000])
    assert words in answer.text, answer.text[:2000]


# --- discovery -----------------------------------------------------------------------------------------------


def test_the_authorization_server_says_it_takes_metadata_documents_and_still_registrations(port: int) -> None:
    document = httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server/oauth").json()
    assert document["client_id_metadata_document_supported"] is True
    assert document["registration_endpoint"] == f"http://127.0.0.1:{port}/oauth/register"


# --- dynamic registration --------------------------------------------------------------------------------------


def register(port: int, metadata: Any) -> httpx2.Response:
    return httpx2.post(f"http://127.0.0.1:{port}/oauth/register", json=metadata, timeout=30)


def registration(**fields: Any) -> dict[str, Any]:
    return {"client_name": "Hosted Claude", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
            **fields}


BOUNDS = {
    "1,000 redirect URIs": (registration(redirect_uris=[f"https://app.example/cb/{n}" for n in range(1_000)]),
                            "invalid_redirect_uri"),
    "11 redirect URIs": (registration(redirect_uris=[f"https://app.example/cb/{n}" for n in range(11)]),
                         "invalid_redirect_uri"),
    "a name of 201 characters": (registration(client_name="n" * 201), "invalid_client_metadata"),
    "a name of 200,000 characters": (registration(client_name="n" * 200_000), "invalid_client_metadata"),
    "a client_uri of 3,000 characters": (registration(client_uri="https://app.example/" + "a" * 3_000),
                                         "invalid_client_metadata"),
    "11 contacts": (registration(contacts=[f"c{n}@app.example" for n in range(11)]), "invalid_client_metadata"),
    "a body of 20 KB": (registration(software_version="v", logo_uri="https://app.example/l.png",
                                     extra=["x" * 1_900] * 10), "invalid_client_metadata"),
}


@pytest.mark.parametrize("name", BOUNDS)
def test_a_registration_past_the_bounds_is_refused_in_rfc_7591s_shape_and_stores_nothing(port: int,
                                                                                         name: str) -> None:
    metadata, error = BOUNDS[name]

    answer = register(port, metadata)

    assert answer.status_code == 400, (answer.status_code, answer.text[:500])
    assert answer.json()["error"] == error and answer.json()["error_description"], answer.json()
    assert not OAuthClient.objects.exists()


def test_a_registration_within_the_bounds_is_made_as_sent(port: int) -> None:
    uris = [f"https://app.example/cb/{n}" for n in range(10)]

    answer = register(port, registration(client_name="n" * 200, redirect_uris=uris))

    assert answer.status_code == 201, answer.text[:500]
    stored = OAuthClient.objects.get()
    assert (stored.name, stored.redirect_uris) == ("n" * 200, uris)


def test_registrations_sent_at_once_are_counted_exactly_and_the_rest_refused_429(port: int) -> None:
    limit = 20  # MCP_OAUTH_REGISTRATIONS_PER_HOUR's default, which the test site keeps
    with ThreadPoolExecutor(max_workers=29) as pool:
        answers = list(pool.map(lambda n: register(port, registration(client_name=f"app {n}")), range(29)))

    made = [answer for answer in answers if answer.status_code == 201]
    refused = [answer for answer in answers if answer.status_code == 429]
    assert (len(made), len(refused)) == (limit, 29 - limit), [answer.status_code for answer in answers]
    assert OAuthClient.objects.count() == limit
    for answer in refused:
        assert answer.json()["error"] == "temporarily_unavailable" and "metadata document" in answer.text
        assert 0 < int(answer.headers["Retry-After"]) <= 3600
    # A registration refused for what it says is answered as such (it stores nothing, so it is not counted).
    assert register(port, registration(redirect_uris=[])).json()["error"] == "invalid_redirect_uri"


# --- client ID metadata documents ------------------------------------------------------------------------------


def test_a_client_with_a_metadata_document_connects_end_to_end(port: int, alice: Any,
                                                               documents: DocumentServer) -> None:
    """The official SDK's client, given a metadata document URL, uses it instead of registering: the person
    consents to the app the document names, and the app calls the tools as them."""
    Project.objects.create(owner=alice, name="Alice's garden")
    client_id = documents.document("/oauth/client.json", headers={"Cache-Control": "max-age=600"})
    person = ThePersonsBrowser(port, session_of(alice), spec="default")
    storage = Remembered()
    endpoint = f"http://127.0.0.1:{port}/assistant/mcp/"
    provider = OAuthClientProvider(
        server_url=endpoint, storage=storage, redirect_handler=person.redirect, callback_handler=person.callback,
        client_metadata=OAuthClientMetadata(client_name="Metadata Claude", redirect_uris=[REDIRECT],
                                            token_endpoint_auth_method="none"),
        client_metadata_url=client_id)

    async def session() -> types.CallToolResult:
        http = httpx2.AsyncClient(auth=provider, timeout=30)
        async with Client(streamable_http_client(endpoint, http_client=http)) as client:
            return await client.call_tool("tracker_project_list", {})

    listed = asyncio.run(session())

    assert "Metadata Claude" in person.consent_page and client_id in person.consent_page  # who it says it is
    assert [row["name"] for row in listed.structured_content["data"]["results"]] == ["Alice's garden"]
    assert storage.client is not None and storage.client.client_id == client_id  # nothing was registered
    stored = OAuthClient.objects.get()
    assert (stored.client_id, stored.kind, stored.name) == (client_id, "metadata", "Metadata Claude")
    token = AccessToken.objects.get(owner=alice)
    assert (token.name, token.oauth_grant_id is not None) == ("Metadata Claude", True)
    assert AgentRun.objects.get().client_name == "Metadata Claude"
    # Fetched once: the consent's page and its yes used the document kept for its max-age.
    assert documents.gets == ["/oauth/client.json"]


def test_a_document_is_fetched_again_when_it_says_not_to_keep_it(port: int, alice: Any,
                                                                 documents: DocumentServer) -> None:
    kept = documents.document("/kept.json", headers={"Cache-Control": "public, max-age=300"})
    unkept = documents.document("/unkept.json", headers={"Cache-Control": "no-store"})
    for _ in range(2):
        assert consent_page(port, alice, kept).status_code == 200
        assert consent_page(port, alice, unkept).status_code == 200
    assert sorted(documents.gets) == ["/kept.json", "/unkept.json", "/unkept.json"]


def _too_big(documents: DocumentServer) -> str:
    url = documents.document("/big.json", logo_uri="https://app.example/" + "a" * 20_000)
    return url


def _too_slow(documents: DocumentServer) -> str:
    url = documents.document("/slow.json")
    documents.routes["/slow.json"].drip = 0.05  # a few hundred bytes at 20 a second: past the 5 s allowed
    return url


def _redirects(documents: DocumentServer, hops: int) -> str:
    target = documents.document("/final.json")
    for hop in range(hops, 0, -1):
        following = f"/hop{hop + 1}" if hop < hops else "/final.json"
        documents.routes[f"/hop{hop}"] = Served(302, b"", {"Location": following})
    # The document names the URL the client gave, the first one.
    first = documents.url("/hop1")
    documents.routes["/final.json"].body = documents.routes["/final.json"].body.replace(
        json.dumps(target).encode(), json.dumps(first).encode())
    return first


def _another_client_id(documents: DocumentServer) -> str:
    url = documents.document("/mine.json")
    documents.routes["/mine.json"].body = documents.routes["/mine.json"].body.replace(
        json.dumps(url).encode(), json.dumps(documents.url("/theirs.json")).encode())
    return url


REFUSED_DOCUMENTS = {
    "too big": (_too_big, "larger than 16 KB"),
    "too slow": (_too_slow, "longer than 5 seconds"),
    "redirecting too often": (lambda documents: _redirects(documents, 4), "redirected more than 3 times"),
    "naming another client_id": (_another_client_id, "client_id is not its own URL"),
    "listing 11 redirect URIs": (lambda documents: documents.document(
        "/many.json", redirect_uris=[f"https://app.example/cb/{n}" for n in range(11)]), "more than 10 redirect_uris"),
    "with a secret": (lambda documents: documents.document("/secret.json", client_secret="s"), "client secret"),
    "not found": (lambda documents: documents.url("/missing.json"), "answered 404"),
}


@pytest.mark.parametrize("case", REFUSED_DOCUMENTS)
def test_a_document_the_site_does_not_take_is_refused_on_the_consent_page_and_nothing_is_made(
    port: int, alice: Any, documents: DocumentServer, case: str
) -> None:
    serve, words = REFUSED_DOCUMENTS[case]
    client_id = serve(documents)

    answer = consent_page(port, alice, client_id)

    refused_page(answer, words)
    assert "invalid_client" in answer.text
    assert not OAuthClient.objects.exists() and not AccessToken.objects.exists()
    assert not redis_client().keys("assistant:oauth-client-document:*")  # a refusal is never kept


def test_a_document_redirected_within_the_limit_is_taken(port: int, alice: Any, documents: DocumentServer) -> None:
    answer = consent_page(port, alice, _redirects(documents, 3))
    assert answer.status_code == 200 and "Metadata Claude" in answer.text, answer.text[:1000]


def test_a_redirect_uri_the_document_does_not_list_is_refused(port: int, alice: Any,
                                                              documents: DocumentServer) -> None:
    client_id = documents.document("/client.json", redirect_uris=["http://localhost:43210/callback"])

    answer = consent_page(port, alice, client_id, redirect_uri="https://attacker.example/callback")

    refused_page(answer, "Unregistered redirect_uri")
    assert "Location" not in answer.headers and not AccessToken.objects.exists()


def test_in_development_a_document_may_be_served_over_loopback_http(port: int, alice: Any) -> None:
    plain = DocumentServer()
    try:
        client_id = plain.document("/dev-client.json", name="Local dev client")
        answer = consent_page(port, alice, client_id)
    finally:
        plain.httpd.shutdown()
    assert answer.status_code == 200 and "Local dev client" in answer.text, answer.text[:1000]


def test_outside_development_only_https_to_public_hosts_is_fetched(documents: DocumentServer) -> None:
    with override_settings(DEBUG=False):
        assert not is_document_url("http://127.0.0.1:8000/client.json")
        assert is_document_url("https://app.example/oauth/client.json")
        with pytest.raises(DocumentRefused, match="not on the public internet"):
            metadata_client(documents.document("/client.json"))
    assert documents.gets == []  # refused before any connection
    assert not OAuthClient.objects.exists()
