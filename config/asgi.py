"""ASGI entry point: HTTP through Django, the assistant's websocket through `assistant.asgi.with_assistant`
(session auth and an Origin check against ALLOWED_HOSTS), exactly as a host project wires it."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

from assistant.asgi import with_assistant
from config.tracing import instrument_site

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
instrument_site()

application = with_assistant(get_asgi_application())
