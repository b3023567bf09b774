"""The person's access tokens page, linked from the panel: their own tokens only, each shown once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.template.loader import render_to_string
from django.test import Client, override_settings

from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import TokenRefused, token_authenticate, token_create
from tests.conftest import PROJECT_DIR, assistant_settings_with

pytestmark = pytest.mark.django_db

PAGE = "/assistant/tokens/"


def signed_in(user: Any, *, enforce_csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    return client


def shown_secret(html: str) -> str:
    match = re.search(r'id="assistant-token-secret"[^>]*value="([^"]+)"', html, re.S)
    assert match, html
    return match.group(1)


def flashed(response: Any) -> list[str]:
    return [str(message) for message in response.wsgi_request._messages]


def test_the_page_needs_a_sign_in(client: Client) -> None:
    response = client.get(PAGE)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_creating_a_token_shows_it_once(alice: Any) -> None:
    as_alice = signed_in(alice)

    response = as_alice.post(PAGE, {"name": "Claude Desktop", "spec": "test-reader", "read_only": "on",
                                    "expires": "30d"})

    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    html = response.content.decode()
    secret = shown_secret(html)
    assert token_authenticate(secret)[0] == alice
    token = AccessToken.objects.get()
    assert (token.name, token.spec, token.read_only, token.expires_at is not None) == (
        "Claude Desktop", "test-reader", True, True)
    assert "shown this once" in html
    # With what to paste into the agent's configuration: the endpoint, and the token as its bearer.
    assert "http://testserver/assistant/mcp/" in html and f"Bearer {secret}" in html
    # The list shows it, by name and prefix, never the secret again.
    listing = as_alice.get(PAGE).content.decode()
    assert "Claude Desktop" in listing and f"{token.prefix}…" in listing and "Read-only" in listing
    assert secret not in listing and "assistant-token-secret" not in listing


def test_the_form_says_what_is_wrong(alice: Any) -> None:
    as_alice = signed_in(alice)
    token_create(owner=alice, name="ci")

    for data, words in [({"name": "", "spec": "default"}, "This field is required"),
                        ({"name": "x", "spec": "nope"}, "Select a valid choice"),
                        ({"name": "x", "spec": "default", "expires": "9y"}, "Select a valid choice"),
                        ({"name": "ci", "spec": "default"}, "already have a token named “ci”")]:
        response = as_alice.post(PAGE, data)
        html = response.content.decode()
        assert response.status_code == 400 and words in html, (data, html)
        assert 'role="alert"' in html and "assistant-token-secret" not in html
    assert AccessToken.objects.count() == 1


def test_the_form_offers_every_spec_the_person_may_use(alice: Any) -> None:
    from assistant.mcp.tokens import spec_choices

    html = signed_in(alice).get(PAGE).content.decode()
    offered = re.findall(r'<option value="([^"]*)"', html.split('name="spec"')[1].split("</select>")[0])
    assert offered == spec_choices() and "test-reader" in offered


def test_the_list_is_the_persons_own_and_revoking_works(alice: Any, bob: Any) -> None:
    alices = token_create(owner=alice, name="laptop")
    bobs = token_create(owner=bob, name="bobs agent")
    as_alice = signed_in(alice)

    html = as_alice.get(PAGE).content.decode()
    assert "laptop" in html and "bobs agent" not in html and bobs.token.prefix not in html

    response = as_alice.post(f"{PAGE}{alices.token.pk}/revoke/")
    assert response.status_code == 302 and response["Location"] == PAGE
    assert flashed(response) == ["Revoked the token “laptop”: it no longer acts as you."]
    with pytest.raises(TokenRefused):
        token_authenticate(alices.secret)
    html = as_alice.get(PAGE).content.decode()
    assert "Revoked" in html and f'id="assistant-token-{alices.token.pk}-revoke"' not in html


def test_another_persons_token_is_not_found_like_a_missing_one(alice: Any, bob: Any) -> None:
    bobs = token_create(owner=bob, name="bobs agent")
    as_alice = signed_in(alice)

    assert as_alice.post(f"{PAGE}{bobs.token.pk}/revoke/").status_code == 404
    assert as_alice.post(f"{PAGE}999999/revoke/").status_code == 404
    assert token_authenticate(bobs.secret)[0] == bob
    assert as_alice.get(f"{PAGE}{bobs.token.pk}/revoke/").status_code == 405


def test_creating_and_revoking_need_the_csrf_token(alice: Any) -> None:
    made = token_create(owner=alice, name="laptop")
    client = signed_in(alice, enforce_csrf_checks=True)

    assert client.post(PAGE, {"name": "x", "spec": "default"}).status_code == 403
    assert client.post(f"{PAGE}{made.token.pk}/revoke/").status_code == 403
    assert AccessToken.objects.count() == 1 and token_authenticate(made.secret)

    page = client.get(PAGE).content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert client.post(f"{PAGE}{made.token.pk}/revoke/", {"csrfmiddlewaretoken": csrf}).status_code == 302
    assert client.post(PAGE, {"name": "x", "spec": "default", "csrfmiddlewaretoken": csrf}).status_code == 200


def test_names_are_escaped(alice: Any) -> None:
    token_create(owner=alice, name='<img src=x onerror="alert(1)">')
    html = signed_in(alice).get(PAGE).content.decode()
    assert "<img src=x" not in html and "&lt;img src=x" in html


def test_the_page_is_labelled_for_keyboards_and_screen_readers(alice: Any) -> None:
    token_create(owner=alice, name="laptop")
    html = signed_in(alice).get(PAGE).content.decode()
    for field in ("name", "spec", "read_only", "expires"):
        assert f'for="assistant-token-{field}"' in html and f'id="assistant-token-{field}"' in html
    assert '<th scope="col">Name</th>' in html and '<th scope="row">laptop</th>' in html
    assert 'Revoke<span class="assistant-visually-hidden"> the token “laptop”</span>' in html


def test_the_panel_links_the_page_when_the_app_is_installed(alice: Any) -> None:
    assert apps.is_installed("assistant.mcp")
    page = signed_in(alice).get("/assistant/").content.decode()
    assert f'href="{PAGE}" data-assistant-tokens' in page


@override_settings(ROOT_URLCONF="tests.testapp.assistant_urls_only")
def test_the_panel_links_no_tokens_page_that_the_host_does_not_route() -> None:
    # The app is installed, but the host includes the assistant's URLs without its (what assistant.W041 names): a
    # link would lead to a 404.
    assert apps.is_installed("assistant.mcp")
    panel = render_to_string("assistant/conversation.html", {})
    assert "data-assistant-memories" in panel and "data-assistant-tokens" not in panel, panel


WITHOUT_THE_APP = """
import django
from django.core.management import call_command
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse

django.setup()
from django.apps import apps

assert not apps.is_installed("assistant.mcp")
call_command("check")
assert reverse("assistant:memories") == "/assistant/memories/"
try:
    reverse("assistant:tokens")
except NoReverseMatch:
    pass
else:
    raise AssertionError("a tokens route without the app")
panel = render_to_string("assistant/conversation.html", {})
assert "data-assistant-memories" in panel and "data-assistant-tokens" not in panel, panel
print("core works without assistant.mcp")
"""


def test_the_core_app_works_and_links_nothing_without_the_sub_app(tmp_path: Path) -> None:
    (tmp_path / "without_mcp.py").write_text(
        "from tests.settings import *  # noqa: F403\n"
        "INSTALLED_APPS = [app for app in INSTALLED_APPS if app != 'assistant.mcp']  # noqa: F405\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "without_mcp",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PROJECT_DIR)])}
    done = subprocess.run([sys.executable, "-c", WITHOUT_THE_APP], env=env, cwd=PROJECT_DIR, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "core works without assistant.mcp" in done.stdout, done.stdout + done.stderr


def test_the_page_stands_alone_without_a_layout(alice: Any) -> None:
    made = token_create(owner=alice, name="laptop")
    as_alice = signed_in(alice)
    with assistant_settings_with(PAGE_LAYOUT=None):
        response = as_alice.post(f"{PAGE}{made.token.pk}/revoke/", follow=True)
    html = response.content.decode()
    assert html.startswith("<!doctype html>") and "<title>Access tokens · Assistant</title>" in html
    # Standalone, the page shows Django's messages itself.
    assert "Revoked the token “laptop”" in html and 'data-assistant-page="tokens"' in html
