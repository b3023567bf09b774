"""Django's PostgreSQL backend, except that its connection pool replaces every connection a database
restart ended at once, instead of one by one with growing pauses.

With CONN_HEALTH_CHECKS, Django hands psycopg_pool a check to run on each connection it gives out, and
psycopg_pool, having found one dead, waits a second, then two, four..., before it checks each further one
in the same request. After a restart every idle connection of the pool is dead: a request that met four
of them waited three seconds, and one that met ten (a pool that had just served a burst) failed after the
pool's timeout. Here the check is made by the backend instead (the same empty query, one round trip), and
a dead connection sends every idle one through psycopg_pool's `check()` at once before the next is taken.

Used by the site's settings (`ENGINE: "config.postgresql"`, CONN_HEALTH_CHECKS off: the check is here).
Without a pool it is Django's backend unchanged.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base
from psycopg import Error as PsycopgError
from psycopg_pool import ConnectionPool

#: Connections tried for one request before the error is the request's: a dead one, then fresh ones.
ATTEMPTS = 3


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        pool = self.pool
        if pool is None:
            return connection
        attempts = 1
        while True:
            try:
                ConnectionPool.check_connection(connection)
                return connection
            except PsycopgError:
                pool.putconn(connection)  # a broken one is dropped, and the pool opens another
                if attempts == ATTEMPTS:
                    raise
            attempts += 1
            pool.check()  # whatever else a restart ended goes now, rather than met one by one
            connection = super().get_new_connection(conn_params)
