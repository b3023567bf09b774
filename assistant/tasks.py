from __future__ import annotations

import os
import socket
from typing import Any

from celery import shared_task


@shared_task(name="assistant.health_check")
def health_check(token: str) -> dict[str, Any]:
    """Echoes the token with where it ran, proving a worker took it from the broker."""
    return {"token": token, "hostname": socket.gethostname(), "pid": os.getpid()}
