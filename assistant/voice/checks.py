"""`manage.py check` for dictation: a transcription model or limit that cannot be used (assistant.E006)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register

from assistant.conf import assistant_settings, needs_assistant_settings
from assistant.llm.errors import ModelConfigurationError
from assistant.voice.transcription import SPEC_HELP, transcription_config

LIMITS = ("DICTATION_MAX_SECONDS", "DICTATION_MAX_BYTES", "DICTATIONS_PER_MINUTE")


@register()
@needs_assistant_settings
def check_dictation(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """A misspelt transcription model is reported at start-up, not as "unavailable" at the first dictation.
    Building its configuration makes no network call."""
    errors: list[CheckMessage] = []
    try:
        transcription_config()
    except ModelConfigurationError as unusable:
        model = assistant_settings.TRANSCRIPTION_MODEL
        errors.append(Error(f"TRANSCRIPTION_MODEL={model!r} cannot be used: {unusable}", hint=SPEC_HELP,
                            id="assistant.E006"))
    for name in LIMITS:
        value = getattr(assistant_settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(Error(f"ASSISTANT[{name!r}] = {value!r} is not a whole number of at least 1.",
                                hint="Give a positive whole number, or leave the key out for its default.",
                                id="assistant.E006"))
    return errors
