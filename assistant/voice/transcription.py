"""The transcription model: `ASSISTANT["TRANSCRIPTION_MODEL"]`, named as chat models are (`openai:whisper-1`, or
`NAME:MODEL` for an `ASSISTANT["PROVIDERS"]` entry of kind openai, with its key and base URL), and reached through
the official SDK at the OpenAI-compatible `/audio/transcriptions`, which OpenAI and local servers (such as
faster-whisper-server or vLLM) speak."""

from __future__ import annotations

import logging
from typing import Any

from assistant.conf import assistant_settings
from assistant.llm.errors import (
    ModelConfigurationError,
    ProviderError,
    classify_status,
    connection_error,
    error_detail,
    timeout_error,
)
from assistant.llm.openai_chat import OPENAI_DEFAULT_BASE_URL
from assistant.llm.remote import KINDS, ProviderConfig, cached_client
from assistant.voice.recording import Recording

logger = logging.getLogger(__name__)

UNAVAILABLE = "Dictation is unavailable right now. Type your message instead, or try again in a minute."
UNREADABLE = "The recording could not be transcribed. Try recording again, or type your message."
SPEC_HELP = (
    "Use openai:MODEL (e.g. openai:whisper-1) or NAME:MODEL with NAME an ASSISTANT['PROVIDERS'] entry of kind "
    "openai; None turns dictation off."
)
# Local servers need no key, but the SDK sends one: any non-empty value does.
_NO_KEY = "not-needed"


class DictationFailed(Exception):
    """A recording was not transcribed; `message` says so to the person, and what went wrong was logged."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DictationUnavailable(DictationFailed):
    """The transcription model is not configured right, or its server failed, timed out or could not be reached."""

    def __init__(self) -> None:
        super().__init__(UNAVAILABLE)


class RecordingUnreadable(DictationFailed):
    """The transcription server answered, and refused this recording."""

    def __init__(self) -> None:
        super().__init__(UNREADABLE)


def dictation_on() -> bool:
    """Whether the site offers dictation: a transcription model is configured (usable or not: `manage.py check`
    says when it is not, assistant.E006, and each dictation then answers that it is unavailable)."""
    return bool(assistant_settings.TRANSCRIPTION_MODEL)


def transcription_config() -> ProviderConfig | None:
    """The transcription model's endpoint, or None when dictation is off. Makes no network call; raises
    ModelConfigurationError for a model that cannot be used."""
    spec = assistant_settings.TRANSCRIPTION_MODEL
    if not spec:
        return None
    if not isinstance(spec, str):
        raise ModelConfigurationError(f"It must be a string such as openai:whisper-1, not {type(spec).__name__}.")
    name, separator, model = (part.strip() for part in spec.partition(":"))
    if not separator or not name or not model:
        raise ModelConfigurationError("It names no provider and model (PROVIDER:MODEL).")
    providers = dict(assistant_settings.PROVIDERS or {})
    if name not in providers and name not in KINDS:
        raise ModelConfigurationError(f"Its provider {name!r} is not an entry of ASSISTANT['PROVIDERS'].")
    config = ProviderConfig.from_settings(
        name, model, providers,
        timeout=assistant_settings.REQUEST_TIMEOUT_SECONDS, max_output_tokens=assistant_settings.MAX_OUTPUT_TOKENS,
    )
    if config.kind != "openai":
        raise ModelConfigurationError(f"Its provider {name!r} is of kind {config.kind}, which has no transcription "
                                      "endpoint.")
    return config


def transcribe(recording: Recording) -> str:
    """The text spoken in `recording`, from the transcription model; nothing of the recording is kept. One
    request, not retried (the person presses again). Raises RecordingUnreadable when the server refused the
    recording, DictationUnavailable for anything else (each logged as a warning)."""
    try:
        config = transcription_config()
    except ModelConfigurationError as unusable:
        logger.warning("Dictation failed: the transcription model cannot be used: %s", unusable)
        raise DictationUnavailable from unusable
    if config is None:
        logger.warning("Dictation failed: no transcription model is configured")
        raise DictationUnavailable
    if not config.api_key and not config.base_url:
        logger.warning("Dictation failed: %s has no API key. Set OPENAI_API_KEY (or the provider's api_key).",
                       config.spec)
        raise DictationUnavailable
    try:
        answer = _request(config, recording)
    except ProviderError as failed:
        logger.warning("Dictation failed: %s", failed)
        # Any other 4xx ("request") is the server refusing this recording; the rest is the server or its setting.
        if failed.kind == "request":
            raise RecordingUnreadable from failed
        raise DictationUnavailable from failed
    text = getattr(answer, "text", None)
    if not isinstance(text, str):
        logger.warning("Dictation failed: %s answered without a text: %r", config.spec, type(answer).__name__)
        raise DictationUnavailable
    # A message is at most MAX_MESSAGE_CHARS long; a server that answers more is cut to what could be sent.
    return text.strip()[: int(assistant_settings.MAX_MESSAGE_CHARS)]


def _request(config: ProviderConfig, recording: Recording) -> Any:
    """One transcription request; the SDK's failures as the readable ProviderErrors chat models raise."""
    import openai  # about a second to import: paid by the first dictation, not by every process

    base_url = config.base_url or OPENAI_DEFAULT_BASE_URL
    api_key = config.api_key or _NO_KEY
    client = cached_client(
        ("openai", base_url, api_key, config.timeout),
        lambda: openai.OpenAI(api_key=api_key, base_url=base_url, timeout=config.timeout, max_retries=0),
    )
    try:
        return client.audio.transcriptions.create(
            model=config.model,
            file=(recording.filename, recording.data, recording.content_type),
            response_format="json",
        )
    except openai.APITimeoutError as exc:
        raise timeout_error(config.spec, config.timeout) from exc
    except openai.APIConnectionError as exc:
        raise connection_error(config.spec, str(exc.__cause__ or exc)) from exc
    except openai.APIStatusError as exc:
        raise classify_status(exc.status_code, provider=config.spec, detail=error_detail(exc.body),
                              headers=dict(exc.response.headers), credential_hint="OPENAI_API_KEY") from exc
    except openai.APIError as exc:  # an answer the SDK could not read
        raise ProviderError(f"{config.spec}: {exc.message}", kind="transient", provider=config.spec) from exc
