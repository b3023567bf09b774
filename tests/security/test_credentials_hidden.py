"""Credentials the assistant holds in memory never show in a repr, which is what a log line with `%r`, an
error report's local variables or a debugger prints: a provider's API key, a run's session key."""

from __future__ import annotations

from assistant.access.authority import SentFrom
from assistant.llm.remote import ProviderConfig

API_KEY = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz"
SESSION_KEY = "q3v8m1x0c7z2l5k9j4h6g2f8d1s0a7p3"


def test_a_providers_api_key_is_not_in_its_config_repr() -> None:
    config = ProviderConfig.from_settings("openai", "gpt-4o-mini", {"openai": {"api_key": API_KEY}},
                                          timeout=5, max_output_tokens=100)
    assert config.api_key == API_KEY  # kept, for the calls
    assert API_KEY not in repr(config) and API_KEY not in str(config)
    assert "gpt-4o-mini" in repr(config)  # the rest still says which endpoint it is


def test_a_session_key_is_not_in_the_repr_of_where_a_message_came_from() -> None:
    sent_from = SentFrom(session_key=SESSION_KEY, client_address="203.0.113.9", origin="http://127.0.0.1:8000")
    assert SESSION_KEY not in repr(sent_from)
    assert "203.0.113.9" in repr(sent_from)
