"""Reachability of the parts a turn needs: database, Redis and at least one Celery worker."""

from __future__ import annotations

import time
from typing import Any

import redis
from django.conf import settings
from django.db import connection


def _timed(probe: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = probe()
    except Exception as exc:  # any failure means "not reachable"; the message is what we report
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    result: dict[str, Any] = {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2)}
    if detail:
        result.update(detail)
    return result


def database_status() -> dict[str, Any]:
    def probe() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()

    return _timed(probe)


def redis_status() -> dict[str, Any]:
    def probe() -> None:
        client = redis.Redis.from_url(str(settings.REDIS_URL), socket_connect_timeout=1, socket_timeout=1)
        try:
            client.ping()
        finally:
            client.close()

    return _timed(probe)


def worker_status(timeout: float = 1.0) -> dict[str, Any]:
    from config.celery import app

    def probe() -> dict[str, Any]:
        # limit=1: one live worker is enough to say "reachable"; don't wait out the timeout for others.
        replies = app.control.ping(timeout=timeout, limit=1)
        if not replies:
            raise RuntimeError("no Celery worker answered")
        return {"workers": sorted(name for reply in replies for name in reply)}

    return _timed(probe)


def overall_status() -> dict[str, Any]:
    parts = {"database": database_status(), "redis": redis_status()}
    # Asking workers goes through Redis; skip it when Redis is down rather than wait for a timeout.
    parts["worker"] = worker_status() if parts["redis"]["ok"] else {"ok": False, "error": "redis unreachable"}
    return {"ok": all(part["ok"] for part in parts.values()), **parts}
