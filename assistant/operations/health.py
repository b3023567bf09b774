"""Reachability of the parts a turn needs: database, Redis and at least one Celery worker.

The page is public (load balancers and uptime checks call it without logging in), so an anonymous
caller learns the status and nothing else; staff, or a caller presenting `HEALTH_TOKEN`, also see each
part's details (timings, error text, worker names). Asking the workers is a broadcast through the
broker, so its answer is shared through the cache for `HEALTH_WORKER_CHECK_SECONDS`, and only one
caller at a time asks: however often the page is hit, the workers are pinged at most once per period.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from redis.exceptions import RedisError

from assistant.conf import assistant_redis_url, assistant_settings
from assistant.infra.redis_connection import redis_client
from assistant.tools.registry import registry

logger = logging.getLogger(__name__)

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
    seconds = sweeper_heartbeat_seconds()
    redis_client().set(SWEEPER_HEARTBEAT_KEY, f"{socket.gethostname()}:{os.getpid()}", px=int(seconds * 1000))


def sweeper_heartbeat() -> str | None:
    """Which worker swept last, if one did within `sweeper_heartbeat_seconds()`."""
    value = redis_client().get(SWEEPER_HEARTBEAT_KEY)
    return value.decode() if isinstance(value, bytes) else value


# The tools each of the site's processes declared when it started (a worker loads the project's code once, so
# one started before a tool was added, changed or removed offers the old set until it restarts): every live
# worker's, kept fresh by its sweeps and dropped when it stops, and the latest web process's, written as it
# starts (assistant/asgi.py). Read by `manage.py check` (assistant.W026), /healthz and each worker's sweep.
WORKER_TOOLS_KEY = "assistant:health:tools:workers"
WEB_TOOLS_KEY = "assistant:health:tools:web"


@dataclass(frozen=True)
class DeclaredTools:
    """The tools one process's code declares: their fingerprint and names, which process, since when."""

    fingerprint: str
    names: tuple[str, ...]
    process: str
    started: float

    @classmethod
    def here(cls) -> DeclaredTools:
        """This process's tools, as its registry holds them now."""
        return cls(registry.fingerprint(), tuple(definition.name for definition in registry.all()),
                   f"{socket.gethostname()}:{os.getpid()}", time.time())

    @classmethod
    def loads(cls, text: bytes | str) -> DeclaredTools:
        found = json.loads(text)
        return cls(str(found["fingerprint"]), tuple(found["names"]), str(found["process"]), float(found["started"]))

    def dumps(self, **more: Any) -> str:
        return json.dumps({**asdict(self), **more})

    def missing_from(self, other: DeclaredTools, them: str) -> str:
        """What this process declares that `other` (called `them`) does not offer, and the reverse, in words."""
        added = sorted(set(self.names) - set(other.names))
        removed = sorted(set(other.names) - set(self.names))
        parts = [f"declares {', '.join(added)}, which {them} does not offer"] if added else []
        parts += [f"no longer declares {', '.join(removed)}, which {them} still offers"] if removed else []
        return "; ".join(parts) or "declares the same tools with other descriptions, fields or approvals"


def record_worker_tools(declared: DeclaredTools) -> None:
    """Says, for a heartbeat's time, which tools this worker offers; drops the entries of workers that went
    without a word (killed), so the hash holds the live ones only."""
    now = time.time()
    seconds = sweeper_heartbeat_seconds()
    client = redis_client()
    entries = client.hgetall(WORKER_TOOLS_KEY)
    gone = [field for field, text in entries.items() if field != declared.process.encode()
            and json.loads(text).get("until", 0) < now]
    pipeline = client.pipeline()
    pipeline.hset(WORKER_TOOLS_KEY, declared.process, declared.dumps(until=now + seconds))
    if gone:
        pipeline.hdel(WORKER_TOOLS_KEY, *gone)
    pipeline.pexpire(WORKER_TOOLS_KEY, int(seconds * 1000))
    pipeline.execute()


def forget_worker_tools(declared: DeclaredTools) -> None:
    """A worker that stops offers nothing any more."""
    redis_client().hdel(WORKER_TOOLS_KEY, declared.process)


def workers_tools() -> list[DeclaredTools]:
    """What each live worker offers, by worker."""
    now = time.time()
    entries = redis_client().hgetall(WORKER_TOOLS_KEY)
    live = [text for text in entries.values() if json.loads(text).get("until", 0) >= now]
    return sorted((DeclaredTools.loads(text) for text in live), key=lambda declared: declared.process)


def record_web_tools() -> None:
    """Says which tools this web process's code declares, for the workers to compare with theirs: the latest
    web process to start has the newest code. Redis out of reach costs the comparison only."""
    from django.apps import apps

    if not apps.ready:  # the registry fills in the apps' ready(); before, it would say no tools at all
        return
    try:
        redis_client().set(WEB_TOOLS_KEY, DeclaredTools.here().dumps())
    except Exception:  # the site runs without it; a worker just cannot say it runs older code
        logger.warning("Could not record this process's assistant tools in Redis", exc_info=True)


def web_tools() -> DeclaredTools | None:
    """What the latest web process to start declares, if one said so."""
    text = redis_client().get(WEB_TOOLS_KEY)
    return DeclaredTools.loads(text) if text is not None else None


def stale_workers(ours: DeclaredTools) -> dict[str, str]:
    """The live workers that offer other tools than `ours` declares, each with what differs."""
    return {theirs.process: ours.missing_from(theirs, "the worker") for theirs in workers_tools()
            if theirs.fingerprint != ours.fingerprint}


def stale_workers_said(stale: dict[str, str]) -> str:
    return "; ".join(f"The Celery worker {process} started with other tools than this code: this code {what}"
                     for process, what in stale.items())


class WorkerTools:
    """What a worker's code declared when it started, said to the site's other processes on every sweep; and
    said in its log, once for each newer set a web process declares, that it runs older code."""

    def __init__(self, app_name: str) -> None:
        self.declared = DeclaredTools.here()
        self.app_name = app_name
        self._told: set[str] = set()

    def sweep(self) -> None:
        record_worker_tools(self.declared)
        web = web_tools()
        if web is None or web.fingerprint == self.declared.fingerprint or web.fingerprint in self._told:
            return
        if web.started <= self.declared.started:  # that web process runs the older code, not this worker
            return
        self._told.add(web.fingerprint)
        logger.warning(
            "This worker runs older code than the site: the web process %s, started after it, %s. Restart this "
            "worker (`celery -A %s worker`): a worker loads the project's tools once, when it starts.",
            web.process, web.missing_from(self.declared, "this worker"), self.app_name,
        )

    def stop(self) -> None:
        forget_worker_tools(self.declared)


def forget_worker_check() -> None:
    """Drop the shared worker check, so the next caller asks the workers again."""
    cache.delete_many([_WORKER_CHECK_KEY, _WORKER_CHECK_LOCK_KEY])


def tools_status() -> dict[str, Any]:
    """Whether every live worker offers the tools this process's code declares."""
    try:
        stale = stale_workers(DeclaredTools.here())
    except RedisError as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    if stale:
        return {"ok": False, "error": f"{stale_workers_said(stale)}. Restart those workers.", "workers": sorted(stale)}
    return {"ok": True}


def overall_status() -> dict[str, Any]:
    parts = {"database": database_status(), "redis": redis_status()}
    # Asking workers goes through Redis; skip it when Redis is down rather than wait for a timeout.
    parts["worker"] = worker_status() if parts["redis"]["ok"] else {"ok": False, "error": "redis unreachable"}
    ok = all(part["ok"] for part in parts.values())
    # A worker on older tools still answers the site's people (with the old tools), so it is shown but does
    # not fail the status: a load balancer would otherwise take every web process out for one stale worker.
    if parts["redis"]["ok"]:
        parts["tools"] = tools_status()
    return {"ok": ok, **parts}


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


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Database, Redis and worker reachability; 503 when any part is down, for load balancers and uptime checks.
    Public: the details only for staff or the health token. `include("assistant.urls")` serves it at
    `assistant/healthz`; a host routes it anywhere else with `path("healthz", healthz)`."""
    code, body = health_report(request)
    return JsonResponse(body, status=code)
