"""Two sites on one Redis server never hear each other's events: Redis Pub/Sub ignores the database number,
so each site's channel layer has a prefix of its own (CHANNEL_LAYER_PREFIX, by default from the database
number of REDIS_URL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from asgiref.sync import async_to_sync
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect as ws_connect

from assistant.live.events import user_group
from tests.conftest import PROJECT_DIR, daphne_on_test_database

pytestmark = pytest.mark.django_db(transaction=True)


def _other_site_redis_url() -> str:
    """The same Redis server as this site's, another database: how a second site shares a server."""
    parts = urlsplit(settings.REDIS_URL)
    number = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(number + 7) % 16}"))


def _layer_of_site(redis_url: str, prefix: str) -> RedisPubSubChannelLayer:
    return RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix)


def _prefix_of_site(env: dict[str, str]) -> str:
    """The prefix the site's processes give the layer, read as they read it (channels_redis' default is
    "asgi")."""
    code = ("from django.conf import settings; "
            "print(settings.CHANNEL_LAYERS['default'].get('CONFIG', {}).get('prefix', 'asgi'))")
    result = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], cwd=PROJECT_DIR,
                            env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "tests.settings"},
                            capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1]


def _open(port: int, user: Any) -> Any:
    client = Client()
    client.force_login(user)
    return ws_connect(f"ws://127.0.0.1:{port}/ws/assistant/", origin="http://127.0.0.1:8000",
                      additional_headers={"Cookie": f"sessionid={client.cookies['sessionid'].value}"})


def _notice(text: str) -> dict[str, Any]:
    return {"type": "assistant.events", "events": [{"type": "assistant.resync", "reason": text}]}


def _wait_for_reason(connection: Any, reason: str) -> list[str]:
    """Every resync reason the socket receives, up to and including `reason`."""
    seen: list[str] = []
    while True:
        event = json.loads(connection.recv(timeout=20))
        if event.get("type") == "assistant.resync":
            seen.append(event.get("reason"))
            if seen[-1] == reason:
                return seen


def test_two_sites_on_one_valkey_hear_only_their_own_people(alice: Any, django_db_blocker: Any) -> None:
    this_prefix = _prefix_of_site({})
    other_url = _other_site_redis_url()
    with daphne_on_test_database(django_db_blocker) as this_port, \
            daphne_on_test_database(django_db_blocker, env={"REDIS_URL": other_url}) as other_port, \
            _open(this_port, alice) as here, _open(other_port, alice) as there:
        # The same person (the same id) has a socket on each site.
        for connection in (here, there):  # a socket joins its person's group before it is accepted
            connection.send(json.dumps({"type": "assistant.ping", "id": "joined"}))
            assert json.loads(connection.recv(timeout=20))["type"] == "assistant.pong"
        other_prefix = _prefix_of_site({"REDIS_URL": other_url})
        this_site = _layer_of_site(settings.REDIS_URL, this_prefix)
        other_site = _layer_of_site(other_url, other_prefix)
        group = user_group(alice.pk)

        async_to_sync(this_site.group_send)(group, _notice("this site's"))
        assert _wait_for_reason(here, "this site's") == ["this site's"]
        # The positive sign that whatever this site published earlier has reached the other site's socket
        # if it ever would: the other site's own event, published later on the same server.
        async_to_sync(other_site.group_send)(group, _notice("the other site's"))
        assert _wait_for_reason(there, "the other site's") == ["the other site's"]
