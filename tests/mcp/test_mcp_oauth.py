"""A hosted agent connects through OAuth (issue 21, item 2): the official MCP SDK's OAuth client discovers the
site's authorization server from the endpoint's 401, registers itself, sends the person to the consent page
(signed in on this site, in a real browser session against daphne), where they pick the spec and read-only,
and then calls the tools as them. The grant is one of the person's tokens: revoking it stops the app."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import mcp_types as types
import pytest
from django.conf import settings
from django.test import Client as BrowserClient
from django_mcpz.oauth.models import AuthorizationCode
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from assistant.infra.redis_connection import redis_client
from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import token_revoke
from assistant.models import AgentRun
from assistant.tools import tools_for
from tracker.models import Project

pytestmark = pytest.mark.django_db(transaction=True)
REDIRECT = "http://localhost:43210/callback"


@pytest.fixture(autouse=True)
def registrations_not_counted_yet() -> None:
    """Each flow registers from this machine's address: earlier runs' registrations of the hour are forgotten,
    so the site's limit on them (MCP_OAUTH_REGISTRATIONS_PER_HOUR) is not what a test meets."""
    client = redis_client()
    for key in client.scan_iter("assistant:oauth-registrations:*"):
        client.delete(key)


class Remembered:
    """The app's own storage of its registration and tokens, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class ThePersonsBrowser:
    """Where the app sends the person: their browser, signed in on the site, which consents as told."""

    def __init__(self, port: int, session_cookie: str, *, spec: str, read_only: bool = False,
                 decision: str = "allow") -> None:
        self.port, self.session_cookie = port, session_cookie
        self.spec, self.read_only, self.decision = spec, read_only, decision
        self.consent_page = ""
        self.result: AuthorizationCodeResult | None = None

    def consent(self, url: str) -> None:
        with httpx2.Client(cookies={settings.SESSION_COOKIE_NAME: self.session_cookie}) as browser:
            page = browser.get(url)
            assert page.status_code == 200, page.text[:500]
            self.consent_page = page.text
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf is not None
            form = {"csrfmiddlewaretoken": csrf.group(1), "decision": self.decision, "assistant_spec": self.spec}
            if self.read_only:
                form["assistant_read_only"] = "on"
            answer = browser.post(url, data=form, headers={"Referer": url})
        assert answer.status_code == 302, answer.text[:500]
        back = parse_qs(urlsplit(answer.headers["Location"]).query)
        self.result = AuthorizationCodeResult(code=back["code"][0], state=back.get("state", [None])[0],
                                              iss=back.get("iss", [None])[0])

    async def redirect(self, url: str) -> None:
        await asyncio.to_thread(self.consent, url)

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def session_of(user: Any) -> str:
    browser = BrowserClient()
    browser.force_login(user)
    return str(browser.cookies[settings.SESSION_COOKIE_NAME].value)


def connected_app(port: int, person: ThePersonsBrowser, storage: Remembered, work: Any) -> Any:
    endpoint = f"http://127.0.0.1:{port}/assistant/mcp/"
    provider = OAuthClientProvider(
        server_url=endpoint, storage=storage, redirect_handler=person.redirect, callback_handler=person.callback,
        client_metadata=OAuthClientMetadata(client_name="Hosted Claude", redirect_uris=[REDIRECT],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none"),
    )

    async def session() -> Any:
        http = httpx2.AsyncClient(auth=provider, timeout=30)
        async with Client(streamable_http_client(endpoint, http_client=http)) as client:
            return await work(client)

    try:
        return asyncio.run(session())
    except BaseExceptionGroup as group:
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None


def test_a_hosted_agent_connects_through_oauth_and_acts_as_the_person_under_the_spec_they_chose(
    port: int, alice: Any, bob: Any
) -> None:
    Project.objects.create(owner=alice, name="Alice's garden")
    Project.objects.create(owner=bob, name="Bob's garage")
    person = ThePersonsBrowser(port, session_of(alice), spec="reader")
    storage = Remembered()

    async def work(client: Client) -> tuple[set[str], types.CallToolResult]:
        names = {tool.name for tool in (await client.list_tools()).tools}
        return names, await client.call_tool("tracker_project_list", {})

    names, listed = connected_app(port, person, storage, work)

    # The consent page names the app and asks the person's choices.
    assert "Hosted Claude" in person.consent_page and 'name=assistant_spec' in person.consent_page
    assert names == {tool.name for tool in tools_for(alice, "reader")}
    assert [row["name"] for row in listed.structured_content["data"]["results"]] == ["Alice's garden"]
    # The grant is one of the person's tokens, under what they chose, and the call is on its record.
    token = AccessToken.objects.get(owner=alice)
    assert (token.name, token.spec, token.read_only, token.oauth_grant_id is not None) == (
        "Hosted Claude", "reader", False, True)
    run = AgentRun.objects.get()
    assert (run.channel, run.client_name, run.owner) == ("mcp", "Hosted Claude", alice)


def test_a_read_only_consent_gives_reads_only_and_revoking_the_token_stops_the_app(port: int, alice: Any) -> None:
    person = ThePersonsBrowser(port, session_of(alice), spec="default", read_only=True)
    storage = Remembered()

    async def names(client: Client) -> set[str]:
        return {tool.name for tool in (await client.list_tools()).tools}

    offered = connected_app(port, person, storage, names)
    assert offered == {tool.name for tool in tools_for(alice, "default", "restricted")}
    assert "tracker_project_delete" not in offered

    token = AccessToken.objects.get(owner=alice)
    token_revoke(owner=alice, token_id=token.pk)

    assert storage.tokens is not None
    refused = httpx2.post(f"http://127.0.0.1:{port}/assistant/mcp/", json={"jsonrpc": "2.0", "id": 1,
                                                                          "method": "initialize", "params": {}},
                          headers={"Authorization": f"Bearer {storage.tokens.access_token}"})
    assert refused.status_code == 401
    assert "resource_metadata=" in refused.headers["WWW-Authenticate"]  # where to ask the person again
    # Its refresh token went with the grant: the app cannot refresh its way back in.
    assert storage.tokens.refresh_token is not None and storage.client is not None
    refreshed = httpx2.post(f"http://127.0.0.1:{port}/oauth/token", data={
        "grant_type": "refresh_token", "refresh_token": storage.tokens.refresh_token,
        "client_id": storage.client.client_id})
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"


def pkce() -> tuple[str, str]:
    """A PKCE pair (verifier, S256 challenge), as a client makes one."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorization_url(port: int, client_id: str, redirect_uri: str, challenge: str) -> str:
    """Where a client sends the person to authorize it for the site's MCP endpoint."""
    return f"http://127.0.0.1:{port}/oauth/authorize?" + urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "s-1",
        "code_challenge": challenge, "code_challenge_method": "S256",
        "resource": f"http://127.0.0.1:{port}/assistant/mcp/"})


def test_a_consent_naming_a_spec_not_offered_makes_nothing(port: int, alice: Any) -> None:
    registered = httpx2.post(f"http://127.0.0.1:{port}/oauth/register", json={
        "client_name": "Hosted Claude", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
    assert registered.status_code == 201, registered.text
    url = authorization_url(port, registered.json()["client_id"], REDIRECT, pkce()[1])

    with httpx2.Client(cookies={settings.SESSION_COOKIE_NAME: session_of(alice)}) as browser:
        page = browser.get(url)
        assert page.status_code == 200, page.text[:500]
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert csrf is not None
        answer = browser.post(url, headers={"Referer": url}, data={
            "csrfmiddlewaretoken": csrf.group(1), "decision": "allow", "assistant_spec": "no-such-spec"})

    # The person is told why, on this site; the app is sent no code, and no token or grant is made.
    assert answer.status_code == 400 and "Location" not in answer.headers, answer.headers
    assert "Choose one of the assistant specs offered, not &#x27;no-such-spec&#x27;" in answer.text, answer.text[:2000]
    assert not AccessToken.objects.exists() and not AuthorizationCode.objects.exists()
