"""Staff see and revoke access tokens in the admin: never a secret, a hash or a fingerprint; no adding or
changing; the list takes only its own filters (any other lookup a 400)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import TokenRefused, token_authenticate, token_create

pytestmark = pytest.mark.django_db

ADMIN = "/admin/assistant_mcp/accesstoken/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client



@pytest.fixture
def superuser_client(user_factory: Callable[..., Any]) -> Client:
    return signed_in(user_factory("root", is_staff=True, is_superuser=True))


def test_staff_see_tokens_but_never_their_secret_or_hash(superuser_client: Client, alice: Any) -> None:
    made = token_create(owner=alice, name="laptop", spec="test-reader", read_only=True)
    token = made.token

    listing = superuser_client.get(ADMIN).content.decode()
    page = superuser_client.get(f"{ADMIN}{token.pk}/change/").content.decode()

    assert "laptop" in listing and f"{token.prefix}…" in listing and "test-reader" in page
    for html in (listing, page):
        assert made.secret not in html and token.token_hash not in html
        assert token.password_fingerprint not in html and alice.password not in html
    # Nobody adds or changes a token here.
    assert superuser_client.get(f"{ADMIN}add/").status_code == 403
    assert 'name="_save"' not in page
    before = AccessToken.objects.values().get()
    superuser_client.post(f"{ADMIN}{token.pk}/change/", {"name": "renamed", "spec": "default", "read_only": ""})
    assert AccessToken.objects.values().get() == before


def test_staff_revoke_tokens_with_the_action(superuser_client: Client, alice: Any, bob: Any) -> None:
    alices = token_create(owner=alice, name="laptop")
    bobs = token_create(owner=bob, name="agent")
    kept = token_create(owner=bob, name="kept")

    response = superuser_client.post(ADMIN, {"action": "revoke_selected",
                                             "_selected_action": [alices.token.pk, bobs.token.pk]}, follow=True)

    assert "Revoked 2 tokens." in response.content.decode()
    for made in (alices, bobs):
        with pytest.raises(TokenRefused):
            token_authenticate(made.secret)
    assert token_authenticate(kept.secret)[0] == bob


def test_staff_who_may_only_view_see_no_revoke_action(user_factory: Callable[..., Any], alice: Any) -> None:
    viewer = user_factory("viewer", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(codename="view_accesstoken", content_type__app_label="assistant_mcp"))
    made = token_create(owner=alice, name="laptop")
    client = signed_in(viewer)

    listing = client.get(ADMIN).content.decode()
    assert "laptop" in listing and "revoke_selected" not in listing
    client.post(ADMIN, {"action": "revoke_selected", "_selected_action": [made.token.pk]})
    assert token_authenticate(made.secret)[0] == alice


def test_the_admin_list_takes_only_its_own_filters(superuser_client: Client, alice: Any) -> None:
    token_create(owner=alice, name="laptop", read_only=True)
    token_create(owner=alice, name="revoked")
    AccessToken.objects.filter(name="revoked").update(revoked_at="2026-01-01T00:00:00Z")

    assert superuser_client.get(f"{ADMIN}?token_hash__startswith=a").status_code == 400
    assert superuser_client.get(f"{ADMIN}?owner__password__startswith=p").status_code == 400
    assert superuser_client.get(f"{ADMIN}?password_fingerprint=x").status_code == 400
    live = superuser_client.get(f"{ADMIN}?state=live").content.decode()
    assert "laptop" in live and ">revoked<" not in live
    revoked = superuser_client.get(f"{ADMIN}?state=revoked").content.decode()
    assert "laptop" not in revoked
    assert superuser_client.get(f"{ADMIN}?read_only__exact=1").status_code == 200
    assert superuser_client.get(f"{ADMIN}?spec=default").status_code == 200
    # A state the filter does not know is said over the unfiltered list, not a 500.
    assert superuser_client.get(f"{ADMIN}?state=nope", follow=True).status_code == 200
