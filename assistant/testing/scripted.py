"""Scripts for the scripted model (`scripted:PATH`, see `assistant.llm.scripted`): a test says what the
model answers, call by call, and the run loop, its tools and its events run for real around it."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def write_script(*entries: Mapping[str, Any], directory: str | os.PathLike[str] | None = None,
                 by_spec: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> str:
    """Writes a script and returns its model spec, `scripted:PATH`.

    Each entry answers one model call: `{"text": "..."}`, `{"tool_calls": [{"name": ..., "arguments":
    {...}}]}`, or both. `by_spec` instead gives each spec of a society its own list (`"*"` for the specs
    it does not name). The file goes in `directory` (a test's temporary folder, such as pytest's
    `tmp_path`), or else in the system's temporary folder, under a name no other script has; the worker
    reads it, so it must be on a disk the worker sees.
    """
    if entries and by_spec is not None:
        raise TypeError("write_script takes entries or by_spec, not both")
    script: object = [dict(entry) for entry in entries] if by_spec is None else {
        spec: [dict(entry) for entry in spec_entries] for spec, spec_entries in by_spec.items()}
    handle, name = tempfile.mkstemp(prefix="script-", suffix=".json", dir=directory)
    with os.fdopen(handle, "w") as file:
        json.dump(script, file)
    return f"scripted:{Path(name)}"
