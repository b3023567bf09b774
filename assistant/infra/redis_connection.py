"""The process's Redis client for the assistant's own keys (breaker state, cancel flags, the sweeper's heartbeat).

Which Redis that is comes from the project's own settings: see `assistant.conf.assistant_redis_url`.
"""

from __future__ import annotations

import threading

import redis

from assistant.conf import assistant_redis_url

_clients: dict[str, redis.Redis] = {}
_clients_lock = threading.Lock()


def redis_client() -> redis.Redis:
    """One client (and connection pool) per process and Redis URL; redis-py reconnects after a fork."""
    url = assistant_redis_url()
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = redis.Redis.from_url(
                url, socket_timeout=2.0, socket_connect_timeout=2.0, health_check_interval=30
            )
        return client
