from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from assistant.conf import assistant_settings


def test_defaults_and_overrides() -> None:
    assert assistant_settings.MAX_MODEL_CALLS == 8
    with override_settings(ASSISTANT={"MAX_MODEL_CALLS": 3}):
        assert assistant_settings.MAX_MODEL_CALLS == 3
    assert assistant_settings.MAX_MODEL_CALLS == 8


def test_unknown_keys_are_rejected_by_name() -> None:
    with (
        override_settings(ASSISTANT={"MAX_MODLE_CALLS": 3}),
        pytest.raises(ImproperlyConfigured, match="MAX_MODLE_CALLS"),
    ):
        _ = assistant_settings.MAX_MODEL_CALLS


def ids(**kwargs: object) -> set[str]:
    return {message.id for message in run_checks(**kwargs) if message.id}


def test_in_memory_channel_layer_outside_debug_is_an_error() -> None:
    layer = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    with override_settings(CHANNEL_LAYERS=layer, DEBUG=False):
        assert "assistant.E002" in ids()
    with override_settings(CHANNEL_LAYERS=layer, DEBUG=True):
        assert "assistant.E002" not in ids()


def test_unreachable_redis_is_an_error() -> None:
    assert "assistant.E003" not in ids()
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        assert "assistant.E003" in ids()


@pytest.mark.django_db
def test_pgvector_is_available_on_the_database() -> None:
    assert "assistant.E001" not in ids(databases=["default"])


def test_a_misspelt_model_or_embedder_is_reported_at_start_up() -> None:
    assert not ids() & {"assistant.E004", "assistant.E005"}
    with override_settings(ASSISTANT={"MODEL": "opneai-gpt", "EMBEDDER": "locl"}):
        assert {"assistant.E004", "assistant.E005"} <= ids()
    with override_settings(ASSISTANT={"MODEL": "scripted:/no/such/script.json"}):
        assert "assistant.E004" in ids()
