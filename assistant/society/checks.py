"""`manage.py check` for the society: how specs are declared and who may ask whom (assistant.E030–E036, W030)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from assistant.conf import assistant_settings, needs_assistant_settings
from assistant.society.members import Problem, member_problems
from assistant.society.offer import delegation_tool_name, is_valid_delegation_name
from assistant.tools.registry import registry


@register()
@needs_assistant_settings
def check_members(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Malformed specs, delegates that are not specs, circles of delegation, delegates that may do more than
    the spec asking them, limits above the global ones, and delegates nobody told the model about."""
    return [
        (Error if problem.error else Warning)(problem.message, hint=problem.hint, id=problem.id)
        for problem in [*member_problems(), *tool_name_problems()]
    ]


def tool_name_problems() -> list[Problem]:
    """A delegate whose tool, `ask_<spec>`, providers refuse or a declared tool is already named (E035)."""
    specs = assistant_settings.SPECS if isinstance(assistant_settings.SPECS, dict) else {}
    known = {*specs, assistant_settings.SPEC}
    graph = {name: tuple(spec.get("delegates") or ()) for name, spec in specs.items()
             if isinstance(spec, dict) and isinstance(spec.get("delegates"), list | tuple)}
    delegates = sorted({delegate for delegates in graph.values() for delegate in delegates if delegate in known})
    problems = []
    for delegate in delegates:
        name = delegation_tool_name(delegate)
        if not is_valid_delegation_name(delegate):
            problems.append(Problem(
                "assistant.E035", f"{delegate!r} makes the delegation tool name {name!r}, which providers refuse.",
                "Name the spec with 1-60 letters, digits, '_' or '-'.",
            ))
        elif name in registry:
            problems.append(Problem(
                "assistant.E035",
                f"The delegation tool for {delegate!r} would be named {name!r}, as a declared tool is.",
                "Rename the spec or the tool: the model must be able to tell them apart.",
            ))
    return problems
