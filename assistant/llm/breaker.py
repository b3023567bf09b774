"""A circuit breaker per provider whose state lives in Redis, so every worker process shares it.

Keys, under `assistant:breaker:<provider>`:

- `...:failures` — calls that failed after their retries, since the last success;
- `...:tripped` — present while the breaker is not closed (set when it opens);
- `...:open` — present, with an expiry of the cool-down, while calls are refused;
- `...:probe` — the half-open probe token, taken with SET NX so exactly one caller gets it.

Closed = no `tripped`; open = `tripped` and `open`; half-open = `tripped` without `open`: the one
caller that takes the probe token is let through, success closes the breaker, failure reopens it.
If Redis cannot be reached the breaker lets calls through (and logs): it protects the providers
and the users' time, it must not become a second way to fail.
"""

from __future__ import annotations

import enum
import logging
import uuid
from typing import Any

import redis

from ..infra.redis_connection import redis_client

logger = logging.getLogger(__name__)

KEY_PREFIX = "assistant:breaker:"
# The tripped marker outlives any cool-down; it only expires so abandoned providers leave no litter.
_TRIPPED_TTL_SECONDS = 7 * 24 * 3600

class Decision(enum.Enum):
    ALLOW = "allow"  # closed: call normally, with retries
    PROBE = "probe"  # half-open and this caller holds the probe token: one attempt only
    REFUSE = "refuse"  # open, or half-open with the probe taken by someone else


class CircuitBreaker:
    """The shared breaker of one provider (a model chain entry such as `openai:gpt-4o-mini`)."""

    def __init__(
        self, provider: str, *, threshold: int, cooldown_seconds: float, probe_seconds: float
    ) -> None:
        self.provider = provider
        self.threshold = max(1, threshold)
        self.cooldown_seconds = cooldown_seconds
        self.probe_seconds = probe_seconds
        base = KEY_PREFIX + provider
        self._failures = base + ":failures"
        self._tripped = base + ":tripped"
        self._open = base + ":open"
        self._probe = base + ":probe"
        self._probe_token: str | None = None

    def state(self) -> str:
        """`closed`, `open` or `half_open`, as every worker sees it now."""
        tripped, is_open = self._redis(lambda r: r.mget(self._tripped, self._open), default=[None, None])
        if not tripped:
            return "closed"
        return "open" if is_open else "half_open"

    def remaining_seconds(self) -> float:
        """How long the breaker stays open (0 when it is not open)."""
        millis = self._redis(lambda r: r.pttl(self._open), default=-2)
        return max(0.0, millis / 1000) if millis and millis > 0 else 0.0

    def allow(self) -> Decision:
        """Whether this caller may call the provider now; PROBE must be followed by a record_*()."""
        state = self.state()
        if state == "closed":
            return Decision.ALLOW
        if state == "open":
            return Decision.REFUSE
        token = uuid.uuid4().hex
        got = self._redis(
            lambda r: r.set(self._probe, token, nx=True, px=max(1, int(self.probe_seconds * 1000))),
            default=True,
        )
        if got:
            self._probe_token = token
            return Decision.PROBE
        return Decision.REFUSE

    def record_success(self) -> None:
        """A call succeeded: the breaker closes (a no-op write when it was closed already)."""
        self._probe_token = None
        self._redis(lambda r: r.delete(self._failures, self._tripped, self._open, self._probe), default=0)

    def record_failure(self, *, open_at_least: float = 0.0) -> None:
        """A call failed after its retries: count it, and open once the threshold is reached.

        A failed probe reopens at once. `open_at_least` keeps it open for a provider's Retry-After.
        """
        was_probe = self._probe_token is not None
        self._probe_token = None

        def write(r: redis.Redis) -> None:
            failures = int(r.incr(self._failures))
            r.expire(self._failures, _TRIPPED_TTL_SECONDS)
            if was_probe or failures >= self.threshold:
                cooldown = max(self.cooldown_seconds, open_at_least)
                pipe = r.pipeline()
                pipe.set(self._tripped, "1", ex=_TRIPPED_TTL_SECONDS)
                pipe.set(self._open, "1", px=max(1, int(cooldown * 1000)))
                pipe.delete(self._probe)
                pipe.execute()
                logger.warning("Circuit breaker for %s is open for %.1fs", self.provider, cooldown)

        self._redis(write, default=None)

    def release_probe(self) -> None:
        """Give the probe token back without a verdict (the probe could not tell health from sickness)."""
        if self._probe_token is None:
            return
        self._probe_token = None
        self._redis(lambda r: r.delete(self._probe), default=0)

    def reset(self) -> None:
        """Forget all state (an operator's reset; tests)."""
        self.record_success()

    def _redis(self, action: Any, *, default: Any) -> Any:
        try:
            return action(redis_client())
        except redis.RedisError:
            logger.exception(
                "Circuit breaker for %s: Redis is unreachable; letting calls through", self.provider
            )
            return default
