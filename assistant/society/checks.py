"""`manage.py check` for the society: how specs are declared and who may ask whom (assistant.E030–E035, W030)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from assistant.checks import needs_assistant_settings
from assistant.society.members import member_problems


@register()
@needs_assistant_settings
def check_members(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Malformed specs, delegates that are not specs, circles of delegation, delegates that may do more than
    the spec asking them, limits above the global ones, and delegates nobody told the model about."""
    return [
        (Error if problem.error else Warning)(problem.message, hint=problem.hint, id=problem.id)
        for problem in member_problems()
    ]
