"""What a moment without Redis (the broker, the channel layer) or PostgreSQL looks like from the code: the
errors a send meets then. The panel's socket and the AG-UI stream both catch these to tell the person their
message is kept (or to post it again), instead of failing as on a bug."""

from __future__ import annotations

import kombu.exceptions
import redis
from django import db

UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    kombu.exceptions.OperationalError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
    db.OperationalError, db.InterfaceError, ConnectionError,
)
