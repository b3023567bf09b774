from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from assistant.conf import assistant_settings


def model_label() -> dict[str, Any]:
    """Which model answers, and whether it is the offline demo (the dock and the page label it)."""
    model = str(assistant_settings.MODEL)
    return {
        "assistant_model": model,
        "assistant_is_demo_model": model.split(",")[0].strip() == "offline",
    }


def assistant(request: HttpRequest) -> dict[str, Any]:
    """The same on every page, for a host's own templates (the dock tag and the page do without it)."""
    return model_label()
