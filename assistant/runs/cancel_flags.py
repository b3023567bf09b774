"""Fast out-of-band signals between the web process and the worker running a turn, kept in Redis.

The database row stays the truth (`AgentRun.cancel_requested`); this key only lets a worker that is
busy streaming a reply notice a cancel within a fraction of a second without querying the database.
"""

from __future__ import annotations

import logging

import redis

from assistant.infra.redis_connection import redis_client

logger = logging.getLogger(__name__)
CANCEL_TTL_SECONDS = 600


def _cancel_key(run_id: int) -> str:
    return f"assistant:cancel:{run_id}"


def request_cancel(run_id: int) -> None:
    try:
        redis_client().set(_cancel_key(run_id), "1", ex=CANCEL_TTL_SECONDS)
    except redis.RedisError:
        logger.warning("Could not flag run %s as cancelled in Redis; the worker sees it at its next step", run_id)


def cancel_requested(run_id: int) -> bool:
    try:
        return bool(redis_client().exists(_cancel_key(run_id)))
    except redis.RedisError:
        return False
