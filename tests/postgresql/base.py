"""The site's PostgreSQL backend with a test database that empties fast.

After each transactional test Django empties every table with one TRUNCATE. TRUNCATE gives each table and
index a new file, under an exclusive lock, and waits for the disk at commit: about 0.45 s with this schema
on a small machine, at the end of several hundred tests. The tables a test leaves hold a handful of rows, so
deleting them is some twenty times quicker; foreign keys are checked at commit (Django declares them
DEFERRABLE), when every table is empty. A flush that resets sequences or cascades into tables it was not
given is left to TRUNCATE, which is what those need.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.operations import DatabaseOperations as PostgreSQLOperations

from config.postgresql import base


class DatabaseOperations(PostgreSQLOperations):
    def sql_flush(self, style: Any, tables: Any, *, reset_sequences: bool = False,
                  allow_cascade: bool = False) -> list[str]:
        if not tables or reset_sequences or allow_cascade:
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return ["SET CONSTRAINTS ALL DEFERRED;",
                *(f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables)]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
