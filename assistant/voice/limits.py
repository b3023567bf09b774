"""How often each person may dictate: DICTATIONS_PER_MINUTE, counted in the assistant's Redis (a recording leaves
no row to count, unlike a message)."""

from __future__ import annotations

from assistant.conf import assistant_settings
from assistant.infra.redis_connection import redis_client

WINDOW_SECONDS = 60


def dictation_counted(user_id: int) -> int | None:
    """Count one dictation of this person's in the current minute; the seconds until that minute ends when it is
    past DICTATIONS_PER_MINUTE (refused), else None. One atomic step (the window's key made with its expiry if new,
    then incremented), so dictations sent at once are counted exactly. Raises RedisError when Redis is out."""
    limit = int(assistant_settings.DICTATIONS_PER_MINUTE)
    key = f"assistant:dictations:{user_id}"
    with redis_client().pipeline(transaction=True) as pipe:
        pipe.set(key, 0, ex=WINDOW_SECONDS, nx=True)
        pipe.incr(key)
        pipe.ttl(key)
        _made, count, ttl = pipe.execute()
    return max(1, int(ttl)) if int(count) > limit else None
