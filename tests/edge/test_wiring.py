"""How a host project wires the assistant in: the ASGI helper composed with the host's own websocket routes,
a Celery worker of the host's own standard Celery app (turns and the sweeper), and no import of any host module."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.testing import WebsocketCommunicator
from django.core.asgi import get_asgi_application
from django.core.checks import run_checks
from django.test import Client
from django.urls import get_resolver, path, reverse

from assistant.asgi import with_assistant
from assistant.testing.worker import WorkerProcess
from tests.conftest import (
    PROJECT_DIR,
    _test_database_url,
    stop_every_sweeper,
    wait_for,
    wait_for_run,
)

GOOD_ORIGIN = (b"origin", b"http://127.0.0.1:8000")
FOREIGN_ORIGIN = (b"origin", b"https://evil.example")


class WhoAmI(AsyncJsonWebsocketConsumer):
    """A host's own websocket consumer: says who the socket belongs to and which route answered."""

    label = "host"

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        await self.send_json({"route": self.label, "user": getattr(user, "username", None) or None})


class ExtraRoute(WhoAmI):
    label = "extra"


def _cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def _open(app: Any, url: str, *headers: tuple[bytes, bytes], first_event: bool = True) -> tuple[bool, Any]:
    """Whether the socket was accepted, and the first event it sent (when `first_event`)."""
    socket = WebsocketCommunicator(app, url, headers=list(headers))
    connected, _ = await socket.connect(timeout=5)
    event = await socket.receive_json_from(timeout=5) if connected and first_event else None
    await socket.disconnect()
    return connected, event


def opened(app: Any, url: str, *headers: tuple[bytes, bytes], first_event: bool = True) -> tuple[bool, Any]:
    return asyncio.run(_open(app, url, *headers, first_event=first_event))


@pytest.mark.django_db(transaction=True)
def test_with_assistant_keeps_the_websocket_routes_a_host_already_has(alice: Any) -> None:
    # A host that already serves a websocket of its own, with no origin check or auth around it.
    host_app = ProtocolTypeRouter({
        "http": get_asgi_application(),
        "websocket": URLRouter([path("ws/host/", WhoAmI.as_asgi())]),
    })
    application = with_assistant(host_app)
    cookie = _cookie(alice)

    # The host's route answers as before, behind exactly what it had before (nothing: any origin).
    assert opened(application, "/ws/host/", FOREIGN_ORIGIN) == (True, {"route": "host", "user": None})
    # The assistant's socket is there, signed in through the session cookie...
    assert opened(application, "/ws/assistant/", GOOD_ORIGIN, cookie, first_event=False) == (True, None)
    # ...and refuses anonymous callers and pages of another site.
    assert opened(application, "/ws/assistant/", GOOD_ORIGIN, first_event=False)[0] is False
    assert opened(application, "/ws/assistant/", FOREIGN_ORIGIN, cookie, first_event=False)[0] is False
    # HTTP is still the host's Django.
    assert application.application_mapping["http"] is host_app.application_mapping["http"]


@pytest.mark.django_db(transaction=True)
def test_extra_routes_get_the_same_origin_check_and_session_as_the_assistants(alice: Any) -> None:
    application = with_assistant(get_asgi_application(), websocket_routes=[path("ws/extra/", ExtraRoute.as_asgi())])
    cookie = _cookie(alice)

    assert opened(application, "/ws/extra/", GOOD_ORIGIN, cookie) == (True, {"route": "extra", "user": alice.username})
    assert opened(application, "/ws/extra/", FOREIGN_ORIGIN, cookie, first_event=False)[0] is False
    assert opened(application, "/ws/assistant/", GOOD_ORIGIN, cookie, first_event=False) == (True, None)


def test_the_site_wires_its_asgi_app_through_the_public_helper() -> None:
    source = (PROJECT_DIR / "config" / "asgi.py").read_text()
    assert "with_assistant(get_asgi_application())" in source
    assert "AuthMiddlewareStack" not in source and "websocket_urlpatterns" not in source


def test_the_import_contracts_hold() -> None:
    # The boundaries of docs/architecture.md's code map are import-linter's contracts in pyproject.toml, checked at
    # any depth of a function: the rooms of assistant/ import only the rooms below them (so the socket's
    # conversation and the worker's turn never import each other, and a run's lifecycle neither), nothing below
    # the top imports Celery's tasks or the other edge modules, the core imports no optional sub-app, the sub-apps
    # nothing of each other (AG-UI takes access tokens through the authenticator the MCP sub-app adds to the core),
    # the registry nothing of the assistant, the two apps nothing of this site or its tests, and no package's
    # modules import each other in a circle.
    linted = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports; "
                             "raise SystemExit(lint_imports())"],
                            cwd=PROJECT_DIR, capture_output=True, text=True, timeout=120)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "0 broken" in linted.stdout


def test_the_contract_that_the_core_imports_no_sub_app_covers_every_module_of_the_core() -> None:
    # A module of assistant/ left out of the contract's sources could import a sub-app unseen.
    contracts = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [contract] = [contract for contract in contracts if contract["name"] == "The core imports no optional sub-app"]
    sub_apps = set(contract["forbidden_modules"])
    assert sub_apps == {"assistant.mcp", "assistant.agui", "assistant.evals"}
    core = {f"assistant.{child.stem}" for child in (PROJECT_DIR / "assistant").iterdir()
            if (child.suffix == ".py" and child.stem != "__init__") or (child / "__init__.py").is_file()}
    assert core - sub_apps == set(contract["source_modules"])


def test_the_core_routes_no_optional_sub_app_and_the_site_routes_those_it_installs() -> None:
    # That the core imports no optional sub-app is a contract (above); a URLconf includes one by its name, which no
    # contract sees. The core's URLconf routes none of their URLs: the host includes them, in the assistant's
    # namespace, where it installs them (config/urls.py).
    core_names = {name for name in get_resolver("assistant.urls").reverse_dict if isinstance(name, str)}
    assert {"page", "memories", "healthz"} <= core_names
    assert core_names.isdisjoint({"mcp", "tokens", "token_revoke", "ag-ui"}), core_names
    assert (reverse("assistant:mcp"), reverse("assistant:tokens"), reverse("assistant:ag-ui")) == (
        "/assistant/mcp/", "/assistant/tokens/", "/assistant/ag-ui/")


def test_no_template_of_the_core_names_a_url_of_an_optional_sub_app() -> None:
    # A link the core's panel shows for a sub-app (the MCP app's tokens page) is one the sub-app registers
    # (assistant/panel_links.py); the core's templates name none of their URLs, which no import contract sees.
    sub_app_names = {name for urls in ("assistant.mcp.urls", "assistant.agui.urls")
                     for name in get_resolver(urls).reverse_dict if isinstance(name, str)}
    assert {"mcp", "tokens", "ag-ui"} <= sub_app_names
    named = {
        (str(template.relative_to(PROJECT_DIR)), name)
        for template in (PROJECT_DIR / "assistant" / "templates").rglob("*.html")
        for name in re.findall(r"""\{%\s*url\s+['"]assistant:([\w-]+)['"]""", template.read_text())
    }
    assert {name for _, name in named} >= {"page", "memories"}, named  # the search finds the core's own
    assert not {(template, name) for template, name in named if name in sub_app_names}


def test_no_script_of_the_core_names_a_channel_of_an_optional_sub_app() -> None:
    # The panel tells an agent's chat from its own by the core's channel ("panel"), not by the value an optional
    # sub-app registers: a site without that app, or with another, gets the same panel.
    from assistant.channel_policies import PANEL, channel_policies

    sub_app_values = {policy.value for policy in channel_policies()} - {PANEL.value}
    assert {"mcp", "eval"} <= sub_app_values
    scripts = list((PROJECT_DIR / "assistant" / "static" / "assistant").glob("*.js"))
    named = {(script.name, value) for script in scripts for value in sub_app_values
             if re.search(rf"""["']{re.escape(value)}["']""", script.read_text())}
    assert not named
    assert any(f'"{PANEL.value}"' in script.read_text() for script in scripts)  # the search finds the core's own


HOST_CELERY = '''
    import os

    from celery import Celery

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "theirproject.settings")

    app = Celery("theirproject")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.autodiscover_tasks()
'''


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_standard_celery_app_of_any_project_runs_turns_and_the_sweeper(
    tmp_path: Path, alice: Any, script: Callable[..., str]
) -> None:
    from assistant.conversation.services import chat_send
    from assistant.infra.redis_connection import redis_client
    from assistant.operations.health import SWEEPER_HEARTBEAT_KEY
    from tests.conftest import assistant_settings_with

    # Only the host's worker may take the turn or sweep.
    stop_every_sweeper()
    redis_client().delete(SWEEPER_HEARTBEAT_KEY)
    assert "assistant.W022" in {message.id for message in run_checks()}

    # The package Celery's documentation tells a Django project to write, and nothing more.
    package = tmp_path / "theirproject"
    package.mkdir()
    (package / "__init__.py").write_text("from .celery import app as celery_app\n\n__all__ = ['celery_app']\n")
    (package / "celery.py").write_text(textwrap.dedent(HOST_CELERY))
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_SETTINGS_MODULE": "tests.settings",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PROJECT_DIR)])}
    # Started as a host project's tests start theirs (assistant.testing.worker), from the project's own folder.
    worker = WorkerProcess("theirproject", env, f"their-worker-{os.getpid()}", tmp_path / "worker.log", cwd=tmp_path,
                           concurrency=1)
    worker.start()
    try:
        wait_for(lambda: redis_client().exists(SWEEPER_HEARTBEAT_KEY) or not worker.alive,
                 timeout=30, what="the host worker's first sweep")
        assert worker.alive, worker.log_tail()
        assert "assistant.W022" not in {message.id for message in run_checks()}

        with assistant_settings_with(MODEL=script({"text": "Done by their worker."})):
            sent = chat_send(user=alice, content="hello")
        run = wait_for_run(sent.run.pk, "succeeded", "failed", timeout=30)
        assert (run.status, run.reply) == ("succeeded", "Done by their worker."), worker.log_tail()
    finally:
        worker.stop()
