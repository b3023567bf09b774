"""Reachability of the parts a turn needs: database, Redis and at least one Celery worker.

The page is public (load balancers and uptime checks call it without logging in), so an anonymous
caller learns the status and nothing else; staff, or a caller presenting `HEALTH_TOKEN`, also see each
part's details (timings, error text, worker names). Asking the workers is a broadcast through the
broker, so its answer is shared through the cache for `HEALTH_WORKER_CHECK_SECONDS`, and only one
caller at a time asks: however often the page is hit, the workers are pinged at most once per period.
"""

from __future__ import annotations

import hmac
import os
import socket
import time
from typing import Any

import redis
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest

from assistant.conf import assistant_redis_url, assistant_settings

_WORKER_CHECK_KEY = "assistant:health:worker"
# Stamped by every worker's run sweeper on each sweep (assistant/tasks.py), read by `manage.py check`.
SWEEPER_HEARTBEAT_KEY = "assistant:health:sweeper"
_WORKER_CHECK_LOCK_KEY = "assistant:health:worker:asking"
# A failed check is asked again sooner, so a worker that comes back is seen within about a second.
_FAILED_CHECK_SECONDS = 1.0
_PING_TIMEOUT_SECONDS = 1.0


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
        client = redis.Redis.from_url(assistant_redis_url(), socket_connect_timeout=1, socket_timeout=1)
        try:
            client.ping()
        finally:
            client.close()

    return _timed(probe)


def _ping_workers() -> dict[str, Any]:
    from celery import current_app

    def probe() -> dict[str, Any]:
        # limit=1: one live worker is enough to say "reachable"; don't wait out the timeout for others.
        replies = current_app.control.ping(timeout=_PING_TIMEOUT_SECONDS, limit=1)
        if not replies:
            raise RuntimeError("no Celery worker answered")
        return {"workers": sorted(name for reply in replies for name in reply)}

    return _timed(probe)


def worker_status() -> dict[str, Any]:
    """The workers' answer, from the cache while it is fresh; otherwise asked by one caller at a time."""
    try:
        return _shared_worker_status()
    except Exception:  # the cache is unreachable: ask the workers directly rather than fail the page
        return _ping_workers()


def _shared_worker_status() -> dict[str, Any]:
    known = cache.get(_WORKER_CHECK_KEY)
    if known is not None:
        return known
    if cache.add(_WORKER_CHECK_LOCK_KEY, True, timeout=_PING_TIMEOUT_SECONDS + 1):
        try:
            status = _ping_workers()
            period = float(assistant_settings.HEALTH_WORKER_CHECK_SECONDS)
            cache.set(_WORKER_CHECK_KEY, status, timeout=period if status["ok"] else min(period, _FAILED_CHECK_SECONDS))
            return status
        finally:
            cache.delete(_WORKER_CHECK_LOCK_KEY)
    # Another caller is asking right now: wait for its answer rather than ask again.
    deadline = time.monotonic() + _PING_TIMEOUT_SECONDS + 1
    while time.monotonic() < deadline:
        time.sleep(0.05)
        known = cache.get(_WORKER_CHECK_KEY)
        if known is not None:
            return known
    return {"ok": False, "error": "the worker check did not finish in time"}


def sweeper_heartbeat_seconds() -> float:
    """How long a sweeper's heartbeat lasts: a few sweep intervals, and never under half a minute."""
    return max(30.0, 3 * float(assistant_settings.SWEEP_INTERVAL_SECONDS))


def record_sweeper_heartbeat() -> None:
    """Says, for a short while, that a worker with the run sweeper attached is alive (and which)."""
    from assistant.redis_connection import redis_client

    seconds = sweeper_heartbeat_seconds()
    redis_client().set(SWEEPER_HEARTBEAT_KEY, f"{socket.gethostname()}:{os.getpid()}", px=int(seconds * 1000))


def sweeper_heartbeat() -> str | None:
    """Which worker swept last, if one did within `sweeper_heartbeat_seconds()`."""
    from assistant.redis_connection import redis_client

    value = redis_client().get(SWEEPER_HEARTBEAT_KEY)
    return value.decode() if isinstance(value, bytes) else value


def forget_worker_check() -> None:
    """Drop the shared worker check, so the next caller asks the workers again."""
    cache.delete_many([_WORKER_CHECK_KEY, _WORKER_CHECK_LOCK_KEY])


def overall_status() -> dict[str, Any]:
    parts = {"database": database_status(), "redis": redis_status()}
    # Asking workers goes through Redis; skip it when Redis is down rather than wait for a timeout.
    parts["worker"] = worker_status() if parts["redis"]["ok"] else {"ok": False, "error": "redis unreachable"}
    return {"ok": all(part["ok"] for part in parts.values()), **parts}


def may_see_details(request: HttpRequest) -> bool:
    """Staff, or a caller sending `Authorization: Bearer <HEALTH_TOKEN>` when a token is configured."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        return True
    token = str(assistant_settings.HEALTH_TOKEN or "")
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    # Compared as bytes (compare_digest refuses str past ASCII, which a header may carry): the header's bytes
    # as sent, which the server decoded as Latin-1 (WSGI and ASGI alike), against the token's in UTF-8.
    try:
        sent = presented.strip().encode("latin-1")
    except UnicodeEncodeError:  # no server hands over such a header; a caller in Python can
        return False
    return hmac.compare_digest(sent, token.encode("utf-8", "surrogatepass"))


def health_report(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    """The status code and the body /healthz answers this caller with."""
    status = overall_status()
    code = 200 if status["ok"] else 503
    return code, status if may_see_details(request) else {"ok": status["ok"]}
