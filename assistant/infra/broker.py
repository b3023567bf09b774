"""A Redis broker transport for the Celery workers that run the assistant's turns.

A project whose Celery broker is Redis sets, beside its `CELERY_BROKER_URL`:

    CELERY_BROKER_TRANSPORT = "assistant.infra.broker.Transport"

It is kombu's Redis transport with one difference: a channel keeps the parameters it was opened with,
so it can still reach the broker after Celery has detached it from its connection.

Why. When the broker goes away while a task with late acknowledgement is running, Celery 5.7's consumer
(`Consumer.on_connection_error_after_connected`, as changed for celery#9705) first calls
`connection.collect()`, then `connection.close()`. The first pass cannot close the task channel:
draining its pending BRPOP on the dead socket raises, so the channel stays half-open, but `collect()`
still detaches the transport from the connection (`transport.client = None`). The second pass closes
that channel for real, which means putting its unacknowledged message back on the queue, and for that
kombu builds a new Redis client from `self.connection.client`, which is now None: `AttributeError:
'NoneType' object has no attribute 'hostname'`. That is not a connection error, so Celery does not
swallow it, and the worker exits with "Unrecoverable error". An idle worker has no unacknowledged
message and survives.

The same detached channel is used once more when the running task finishes and is acknowledged after
the reconnect; without its parameters that acknowledgement fails the same way.

With the parameters kept, the close either reaches the broker or fails with a connection error (which
Celery expects and ignores), the late acknowledgement reaches the restarted broker, and the worker
carries on. A message put back while its task still runs is delivered twice; the run's lease makes
the second delivery a no-op (see assistant/runs/lease.py).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        known: dict[bool, dict[str, Any]] = self.__dict__.setdefault("_opened_with", {})
        transport = self.connection
        if transport is not None and transport.client is not None:
            known[asynchronous] = super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]
            return dict(known[asynchronous])
        if asynchronous in known:
            return dict(known[asynchronous])
        # Never opened and already detached: nothing to reach. A connection error is what Celery's
        # clean-up paths expect and ignore.
        raise RedisConnectionError("The broker channel is closed.")


class Transport(kombu_redis.Transport):
    Channel = Channel
