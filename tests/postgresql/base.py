"""The site's PostgreSQL backend with a test database that empties fast.

After each transactional test Django empties every table with one TRUNCATE. TRUNCATE gives each table and
index a new file, under an exclusive lock, and waits for the disk at commit: about 0.45 s with this schema
on a small machine, at the end of several hundred tests. The tables a test leaves hold a handful of rows, so
deleting them is some twenty times quicker; foreign keys are checked at commit (Django declares them
DEFERRABLE), when every table is empty. A flush that resets sequences or cascades into tables it was not
given is left to TRUNCATE, which is what those need.

Unlike TRUNCATE, DELETE lets other sessions write while it runs: a browser test's server or the suite's
worker can still be saving a row (a session, a step) as the test ends, and a row committed after its
table was emptied but pointing at a person deleted after it fails the flush at commit. The flush is one
transaction, so a failed one changed nothing and is run again, when the late row is there to delete.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.db.backends.postgresql.operations import DatabaseOperations as PostgreSQLOperations

from config.postgresql import base

FLUSH_ATTEMPTS = 3


class DatabaseOperations(PostgreSQLOperations):
    def sql_flush(self, style: Any, tables: Any, *, reset_sequences: bool = False,
                  allow_cascade: bool = False) -> list[str]:
        if not tables or reset_sequences or allow_cascade:
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return ["SET CONSTRAINTS ALL DEFERRED;",
                *(f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables)]

    def execute_sql_flush(self, sql_list: list[str]) -> None:
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                super().execute_sql_flush(sql_list)
                return
            except DatabaseError:
                # A late writer's row (see above), or a deadlock with one: rolled back, so run it again.
                if attempt == FLUSH_ATTEMPTS:
                    raise


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
