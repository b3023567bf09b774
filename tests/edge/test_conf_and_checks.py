from __future__ import annotations

import sys
from typing import Any

import pytest
from django.conf import settings
from django.core.checks import ERROR, WARNING, CheckMessage, run_checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.test import override_settings

from assistant.conf import assistant_redis_url, assistant_settings


def test_defaults_and_overrides() -> None:
    # The site sets its own (a society's tree shares them); a project that sets none gets the default.
    assert assistant_settings.MAX_MODEL_CALLS == 30
    with override_settings(ASSISTANT={}):
        assert assistant_settings.MAX_MODEL_CALLS == 8
    with override_settings(ASSISTANT={"MAX_MODEL_CALLS": 3}):
        assert assistant_settings.MAX_MODEL_CALLS == 3
    assert assistant_settings.MAX_MODEL_CALLS == 30


def test_unknown_keys_are_rejected_by_name() -> None:
    with (
        override_settings(ASSISTANT={"MAX_MODLE_CALLS": 3}),
        pytest.raises(ImproperlyConfigured, match="MAX_MODLE_CALLS"),
    ):
        _ = assistant_settings.MAX_MODEL_CALLS



@pytest.mark.parametrize("assistant", [{"MODLE": "offline"}, "offline"], ids=["misspelt key", "not a dict"])
def test_a_wrong_assistant_setting_is_one_check_message_not_a_traceback(assistant: object) -> None:
    with override_settings(ASSISTANT=assistant):
        messages = [message for message in run_checks() if message.id and message.id.startswith("assistant.")]
    assert [message.id for message in messages] == ["assistant.E026"]
    assert "ASSISTANT" in messages[0].msg and messages[0].hint
    if isinstance(assistant, dict):
        assert "MODLE" in messages[0].msg

def test_a_sub_apps_keys_are_its_own_and_known_where_it_is_installed() -> None:
    # An optional sub-app reads its keys of the same ASSISTANT dict through settings of its own (assistant/mcp/conf.py,
    # assistant/evals/conf.py), with its own defaults; the core's check of the dict knows them while it is installed.
    from assistant.conf import settings_problem
    from assistant.evals.conf import evals_settings
    from assistant.mcp.conf import mcp_settings

    with override_settings(ASSISTANT={}):
        assert (mcp_settings.MCP_APPROVAL_SECONDS, evals_settings.EVALS_EDITABLE) == (600, False)
    with override_settings(ASSISTANT={"MCP_APPROVAL_SECONDS": 30, "JUDGE_MODEL": "offline"}):
        assert settings_problem() is None
        assert (mcp_settings.MCP_APPROVAL_SECONDS, evals_settings.JUDGE_MODEL) == (30, "offline")
        with pytest.raises(AttributeError):
            _ = assistant_settings.MCP_APPROVAL_SECONDS  # the core reads none of them
    without_mcp = [app for app in settings.INSTALLED_APPS if app != "assistant.mcp"]
    with override_settings(INSTALLED_APPS=without_mcp, ASSISTANT={"MCP_APPROVAL_SECONDS": 30, "JUDGE_MODEL": None}):
        problem = settings_problem() or ""
        assert problem.startswith("Unknown ASSISTANT setting(s): MCP_APPROVAL_SECONDS. Known: "), problem


def ids(**kwargs: object) -> set[str]:
    return {message.id for message in run_checks(**kwargs) if message.id}


def by_id(check_id: str, **kwargs: object) -> CheckMessage:
    """The one message `check_id` among what `manage.py check` would print; fails when absent."""
    found = [message for message in run_checks(**kwargs) if message.id == check_id]
    assert len(found) == 1, f"{check_id} not reported; got {[m.id for m in run_checks(**kwargs)]}"
    assert found[0].hint, f"{check_id} says what is wrong but not how to fix it"
    return found[0]


REDIS_LAYER = "channels_redis.pubsub.RedisPubSubChannelLayer"


def test_in_memory_channel_layer_is_an_error_even_under_debug() -> None:
    # The worker is another process: an in-memory layer drops every step it sends, DEBUG or not.
    layer = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    for debug in (False, True):
        with override_settings(CHANNEL_LAYERS=layer, DEBUG=debug):
            message = by_id("assistant.E002")
            assert message.level == ERROR
            assert "channels_redis" in message.hint


def test_no_channel_layer_at_all_is_a_check_message_not_a_traceback() -> None:
    with override_settings():
        del settings.CHANNEL_LAYERS
        message = by_id("assistant.E020")
        assert "CHANNEL_LAYERS" in message.msg
        assert REDIS_LAYER in message.hint
    with override_settings(CHANNEL_LAYERS={}):
        assert by_id("assistant.E020").level == ERROR


def test_a_channel_layer_that_is_not_redis_is_a_warning() -> None:
    layer = {"default": {"BACKEND": "some_package.layers.PostgresChannelLayer"}}
    with override_settings(CHANNEL_LAYERS=layer):
        message = by_id("assistant.W020")
        assert message.level == WARNING
        assert "some_package.layers.PostgresChannelLayer" in message.msg


def test_a_redis_layer_without_a_prefix_of_its_own_is_a_warning() -> None:
    # Redis Pub/Sub ignores the database number: another site on the server would hear this one's events.
    for config in ({"hosts": ["redis://127.0.0.1:6379/4"]}, {"hosts": ["redis://127.0.0.1:6379/4"], "prefix": " "}):
        with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_LAYER, "CONFIG": config}}):
            message = by_id("assistant.W025")
            assert "prefix" in message.hint
    named = {"default": {"BACKEND": REDIS_LAYER, "CONFIG": {"hosts": ["redis://127.0.0.1:6379/4"], "prefix": "shop"}}}
    with override_settings(CHANNEL_LAYERS=named):
        assert "assistant.W025" not in {message.id for message in run_checks()}


def test_the_redis_url_comes_from_the_channel_layer_then_the_broker_then_one_assistant_key() -> None:
    layer = {"default": {"BACKEND": REDIS_LAYER, "CONFIG": {"hosts": ["redis://layer.example:6379/3"]}}}
    other = {"default": {"BACKEND": "some_package.layers.OtherLayer"}}
    # A top-level REDIS_URL is the site's own variable: the assistant does not read it.
    with override_settings(CHANNEL_LAYERS=layer, CELERY_BROKER_URL="redis://broker.example/1",
                           REDIS_URL="redis://ignored.example/9"):
        assert assistant_redis_url() == "redis://layer.example:6379/3"
        with override_settings(ASSISTANT={"REDIS_URL": "redis://own.example/2"}):
            assert assistant_redis_url() == "redis://own.example/2"
    with override_settings(CHANNEL_LAYERS=other, CELERY_BROKER_URL="redis://broker.example/1"):
        assert assistant_redis_url() == "redis://broker.example/1"
    # The forms channels_redis accepts for a host: a dict with an address, a (host, port) pair.
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_LAYER, "CONFIG": {
            "hosts": [{"address": "rediss://secure.example:6380/0", "retry_on_error": []}]}}}):
        assert assistant_redis_url() == "rediss://secure.example:6380/0"
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_LAYER, "CONFIG": {
            "hosts": [("pair.example", 6390)]}}}):
        assert assistant_redis_url() == "redis://pair.example:6390/0"


def test_no_redis_anywhere_is_an_error_that_names_the_three_places() -> None:
    other = {"default": {"BACKEND": "some_package.layers.OtherLayer"}}
    with override_settings(CHANNEL_LAYERS=other, CELERY_BROKER_URL="amqp://guest@rabbit//"):
        with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
            assistant_redis_url()
        message = by_id("assistant.E021")
        assert "ASSISTANT" in message.hint and "REDIS_URL" in message.hint
        # Nothing to reach, so no "unreachable" on top of it.
        assert "assistant.E003" not in ids()


def test_unreachable_redis_is_an_error() -> None:
    assert "assistant.E003" not in ids()
    with override_settings(ASSISTANT={"REDIS_URL": "redis://127.0.0.1:1/0"}):
        assert "127.0.0.1:1" in by_id("assistant.E003").msg


def test_no_celery_broker_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    with override_settings():
        del settings.CELERY_BROKER_URL
        message = by_id("assistant.E022")
        assert "CELERY_BROKER_URL" in message.hint and "celery -A" in message.hint


def test_a_redis_broker_without_the_assistants_transport_is_a_warning() -> None:
    assert "assistant.W023" not in ids()
    with override_settings(CELERY_BROKER_TRANSPORT=None):
        assert "assistant.infra.broker.Transport" in by_id("assistant.W023").hint


def test_daphne_missing_or_after_staticfiles_under_debug_is_an_error() -> None:
    apps = [app for app in settings.INSTALLED_APPS if app != "daphne"]
    with override_settings(DEBUG=True, INSTALLED_APPS=apps):
        message = by_id("assistant.E024")
        assert "runserver" in message.msg and '"daphne"' in message.hint
    with override_settings(DEBUG=True, INSTALLED_APPS=[*apps, "daphne"]):
        assert "django.contrib.staticfiles" in by_id("assistant.E024").msg
    with override_settings(DEBUG=False, INSTALLED_APPS=apps):
        assert "assistant.E024" not in ids()  # production runs daphne itself, not runserver
    assert "assistant.E024" not in ids()


def test_no_asgi_application_under_debug_is_an_error() -> None:
    with override_settings(DEBUG=True):
        assert "assistant.E025" not in ids()
        del settings.ASGI_APPLICATION
        assert "ASGI_APPLICATION" in by_id("assistant.E025").hint


def test_channels_missing_from_installed_apps_is_a_warning() -> None:
    apps = [app for app in settings.INSTALLED_APPS if app != "channels"]
    with override_settings(INSTALLED_APPS=apps):
        assert '"channels"' in by_id("assistant.W021").hint


def test_the_local_embedder_without_its_weights_says_how_to_install_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant.embeddings.minilm import INSTALL_HINT, WEIGHTS_PACKAGE

    assert "assistant.E005" not in ids()
    # The weights package is not importable, as on a machine where it was never installed.
    monkeypatch.setitem(sys.modules, WEIGHTS_PACKAGE, None)
    message = by_id("assistant.E005")
    assert INSTALL_HINT in message.hint


@pytest.mark.django_db
def test_pgvector_is_available_on_the_database() -> None:
    assert "assistant.E001" not in ids(databases=["default"])


def test_a_database_that_is_not_postgresql_is_an_error_not_a_traceback(django_db_blocker: Any) -> None:
    # A project that kept startproject's SQLite, as a second alias (an in-memory one: Django's own
    # database checks open it).
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    configured = connections.configure_settings({"default": connections.settings["default"], "kept_sqlite": sqlite})
    connections.settings["kept_sqlite"] = configured["kept_sqlite"]
    try:
        with django_db_blocker.unblock():
            message = by_id("assistant.E001", databases=["kept_sqlite"])
        assert "sqlite" in message.msg and "django.db.backends.postgresql" in message.hint
    finally:
        with django_db_blocker.unblock():
            connections["kept_sqlite"].close()
        del connections["kept_sqlite"]
        del connections.settings["kept_sqlite"]


def test_a_misspelt_model_or_embedder_is_reported_at_start_up() -> None:
    assert not ids() & {"assistant.E004", "assistant.E005"}
    with override_settings(ASSISTANT={"MODEL": "opneai-gpt", "EMBEDDER": "locl"}):
        assert {"assistant.E004", "assistant.E005"} <= ids()
    with override_settings(ASSISTANT={"MODEL": "scripted:/no/such/script.json"}):
        assert "assistant.E004" in ids()


# The dock's static files (W024): said only where the settings prove nothing serves them.

NO_FINDERS = {"DEBUG": False, "WHITENOISE_USE_FINDERS": False, "STATIC_ROOT": None,
              "STORAGES": {**settings.STORAGES,
                           "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}}


def test_debug_off_with_nothing_collected_or_served_from_the_apps_is_a_warning() -> None:
    with override_settings(**NO_FINDERS):
        warning = by_id("assistant.W024")
    assert "STATIC_ROOT is not set" in warning.msg and "404" in warning.msg
    assert "collectstatic" in str(warning.hint) and "WhiteNoise" in str(warning.hint)


@pytest.mark.parametrize("working", [
    {"DEBUG": True},  # runserver serves them; plain daphne's 404s cannot be seen from settings
    {"WHITENOISE_USE_FINDERS": True},  # WhiteNoise serves them from the apps' folders
    {"STORAGES": {**settings.STORAGES,  # kept elsewhere (S3, a CDN): nothing to look at here
                  "staticfiles": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}},
], ids=["debug", "whitenoise-finders", "remote-storage"])
def test_setups_that_serve_the_dock_s_files_get_no_warning(working: dict[str, Any]) -> None:
    with override_settings(**{**NO_FINDERS, **working}):
        assert "assistant.W024" not in ids()


def test_a_static_root_collected_before_the_assistant_was_installed_is_a_warning(tmp_path: Any) -> None:
    from django.core.management import call_command

    root = tmp_path / "static"
    with override_settings(**{**NO_FINDERS, "STATIC_ROOT": str(root)}):
        # Not collected yet (a release about to run collectstatic): no fault.
        assert "assistant.W024" not in ids()
        (root / "admin").mkdir(parents=True)
        (root / "admin" / "base.css").write_text("/* collected earlier */")
        warning = by_id("assistant.W024")
        assert "assistant/assistant.css" in warning.msg and "collectstatic" in str(warning.hint)
        call_command("collectstatic", interactive=False, verbosity=0)
        assert (root / "assistant" / "dock.js").is_file()
        assert "assistant.W024" not in ids()
