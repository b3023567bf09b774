"""`scripted:PATH` — replays a JSON script, one entry per model call, for tests and reproducible demos.

The script is a list; each entry is `{"text": "..."}`, `{"tool_calls": [{"name": ..., "arguments":
{...}}]}`, or both keys. A tool call may carry its own `"id"`; otherwise ids are `call_<entry>_<n>`.
A society's specs can each have their own script in one file: an object of spec names to lists, with
`"*"` for any spec it does not name (`{"orchestrator": [...], "clerk": [...]}`); the run loop says
which spec a run is under when it starts (`seek(position, spec=...)`).
The position in the script belongs to the model instance: `get_model()` makes a fresh instance
(starting at the first entry), and the run loop makes one per run, so each run replays the script
from the start; a run taken up again `seek()`s past the entries its earlier attempts used. Calling
past the end raises `ScriptExhaustedError`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import ModelConfigurationError, ScriptExhaustedError
from .types import Message, ModelResponse, TextDeltaCallback, ToolCall, ToolSpec, Usage

_ENTRY_KEYS = frozenset({"text", "tool_calls"})
_CALL_KEYS = frozenset({"id", "name", "arguments"})


#: In a script of several specs, the list for every spec it does not name.
ANY_SPEC = "*"


def load_scripts(path: str | Path) -> dict[str, list[ModelResponse]]:
    """Parse and check a script file: its lists by spec name (a plain list is every spec's, `"*"`)."""
    source = Path(path)
    try:
        raw = json.loads(source.read_text())
    except OSError as exc:
        raise ModelConfigurationError(f"Cannot read the model script {source}: {exc.strerror}.") from exc
    except json.JSONDecodeError as exc:
        raise ModelConfigurationError(f"The model script {source} is not valid JSON: {exc}.") from exc
    if isinstance(raw, list):
        raw = {ANY_SPEC: raw}
    if not isinstance(raw, dict) or not all(isinstance(entries, list) for entries in raw.values()):
        raise ModelConfigurationError(f"The model script {source} must be a JSON list of responses, or an "
                                      "object of spec names to such lists.")
    return {spec: [_parse_entry(entry, number, source if spec == ANY_SPEC else f"{source} [{spec}]")
                   for number, entry in enumerate(entries, start=1)] for spec, entries in raw.items()}


def _parse_entry(entry: Any, number: int, source: Path | str) -> ModelResponse:
    where = f"{source}, entry {number}"
    if not isinstance(entry, dict) or not entry or set(entry) - _ENTRY_KEYS:
        raise ModelConfigurationError(
            f'{where}: each entry must be an object with "text" and/or "tool_calls".'
        )
    text = entry.get("text", "")
    if not isinstance(text, str):
        raise ModelConfigurationError(f'{where}: "text" must be a string.')
    calls_raw = entry.get("tool_calls", [])
    if not isinstance(calls_raw, list):
        raise ModelConfigurationError(f'{where}: "tool_calls" must be a list.')
    calls = []
    for index, call in enumerate(calls_raw, start=1):
        if not isinstance(call, dict) or set(call) - _CALL_KEYS or not isinstance(call.get("name"), str):
            raise ModelConfigurationError(
                f'{where}: tool call {index} must be {{"name": "...", "arguments": {{...}}}}.'
            )
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ModelConfigurationError(f"{where}: the arguments of tool call {index} must be an object.")
        calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{number}_{index}"), name=call["name"], arguments=arguments
            )
        )
    return ModelResponse(text=text, tool_calls=tuple(calls), model="scripted")


class ScriptedModel:
    """Replays `load_scripts(path)`; the position is per instance (see the module docstring)."""

    is_demo = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = f"scripted:{path}"
        self._scripts = load_scripts(self.path)
        self._responses = self._scripts.get(ANY_SPEC, [])
        self._position = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return len(self._responses) - self._position

    def seek(self, position: int, spec: str | None = None) -> None:
        """Continue from entry `position` (0-based) of the script of `spec` (the run's): a run taken up again
        after a crash or a confirmation has already used that many entries in its earlier attempts."""
        with self._lock:
            if spec is not None:
                self._responses = self._scripts.get(spec, self._scripts.get(ANY_SPEC, []))
            self._position = max(0, min(int(position), len(self._responses)))

    def call_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text_delta: TextDeltaCallback | None = None,
    ) -> ModelResponse:
        """The next scripted response; `tools` are not checked: the loop's executor does that."""
        with self._lock:
            if self._position >= len(self._responses):
                raise ScriptExhaustedError(
                    f"The scripted model ran out of responses: {self.path} has {len(self._responses)} "
                    f"and this was call {self._position + 1}."
                )
            response = self._responses[self._position]
            self._position += 1
        if on_text_delta is not None and response.text:
            on_text_delta(response.text)
        prompt = sum(len(m.content) for m in messages) // 4
        return ModelResponse(
            text=response.text,
            tool_calls=response.tool_calls,
            usage=Usage(prompt, len(response.text) // 4),
            model="scripted",
            provider=self.name,
        )

    def complete(
        self, messages: Sequence[Message], *, on_text_delta: TextDeltaCallback | None = None
    ) -> ModelResponse:
        return self.call_tools(messages, (), on_text_delta=on_text_delta)
