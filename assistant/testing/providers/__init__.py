"""Fake model servers on 127.0.0.1 that speak the providers' HTTP APIs (chat, and transcription for dictation), for
tests and benchmarks.

They check the request bodies the way the real APIs would refuse them (HTTP 400 with a message),
record every request for assertions, and answer with queued replies: JSON or SSE streams, any
status and headers, optionally after a delay (to play a hanging server).
"""

from __future__ import annotations

from .anthropic_server import FakeAnthropicServer, anthropic_message, anthropic_stream
from .openai_server import FakeOpenAIServer, openai_completion, openai_stream
from .server import FakeServer, Recorded, Reply, error_reply
from .transcription_server import FakeTranscriptionServer, FormFile, transcription_reply

__all__ = [
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "FakeServer",
    "FakeTranscriptionServer",
    "FormFile",
    "Recorded",
    "Reply",
    "anthropic_message",
    "anthropic_stream",
    "error_reply",
    "openai_completion",
    "openai_stream",
    "provider_settings",
    "transcription_reply",
]


def provider_settings(**providers: dict[str, object]) -> dict[str, object]:
    """An ASSISTANT settings dict with these PROVIDERS and failover timings fit for tests (seconds)."""
    return {
        "PROVIDERS": providers,
        "REQUEST_TIMEOUT_SECONDS": 0.5,
        "PROVIDER_RETRIES": 2,
        "RETRY_BACKOFF_SECONDS": 0.01,
        "RETRY_BACKOFF_MAX_SECONDS": 0.05,
        "RETRY_AFTER_MAX_SECONDS": 2.0,
        "BREAKER_FAILURE_THRESHOLD": 1,
        "BREAKER_COOLDOWN_SECONDS": 1.0,
    }
