from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from assistant.conf import assistant_settings


def assistant(request: HttpRequest) -> dict[str, Any]:
    """What the dock needs on every page: which model answers, and whether it is the offline demo."""
    model = str(assistant_settings.MODEL)
    return {
        "assistant_model": model,
        "assistant_is_demo_model": model.split(",")[0].strip() == "offline",
    }
