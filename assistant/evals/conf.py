"""The evals sub-app's settings: keys of the same `ASSISTANT = {...}` dict as the core's, with defaults of their
own, read through `evals_settings` (known to the core's check of the dict where this app is installed: apps.py)."""

from __future__ import annotations

from typing import Any

from assistant.conf import AppSettings

DEFAULTS: dict[str, Any] = {
    # Eval sets and their cases are evidence: staff may refine a case's expectations, and delete cases and sets,
    # only when this is True.
    "EVALS_EDITABLE": False,
    # The model that grades replies against a case's rubric (None: the core's MODEL); the offline demo model
    # cannot.
    "JUDGE_MODEL": None,
    # Graders a developer adds, by dotted path (graders.py says how).
    "EVAL_GRADERS": [],
}

evals_settings = AppSettings(DEFAULTS)
