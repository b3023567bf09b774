"""Writes that only happen while a worker holds its run's lease: the fence folded into the write itself.

A worker presumed dead (its heartbeat stalled, the sweeper re-queued its run, another worker claimed
it) may still be running. Checking the lease and then writing would leave a gap between the two; here the
check is part of the write's own statement, one round trip like the plain write it replaces:

    INSERT INTO step (...) SELECT %s, ... FROM run WHERE id = %s AND lease_owner = %s FOR SHARE
    UPDATE step SET ... WHERE id = %s AND EXISTS (SELECT 1 FROM run WHERE id = %s AND lease_owner = %s FOR SHARE)

`FOR SHARE` holds the run row until the write commits, so a claim (an UPDATE of that row) waits for it
and then sees it: a new holder never misses a step the old one wrote just before it lost the lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from django.db import connection, models

from assistant.models import AgentRun


def _lease_condition() -> str:
    table = AgentRun._meta.db_table
    return f'SELECT 1 FROM "{table}" WHERE "id" = %s AND "lease_owner" = %s FOR SHARE'  # noqa: S608


def _cast(field: models.Field) -> str:
    # Text keeps its own column's length check (a cast to varchar(n) would cut silently instead).
    if isinstance(field, models.CharField | models.TextField):
        return "text"
    return str(field.cast_db_type(connection))


@cache
def _insert_sql(model: type[models.Model]) -> tuple[str, tuple[models.Field, ...]]:
    meta = model._meta
    fields = tuple(field for field in meta.concrete_fields if not field.primary_key)
    columns = ", ".join(f'"{field.column}"' for field in fields)
    # Each value is cast to its column's type: in INSERT … SELECT the target does not type the parameters.
    values = ", ".join(f"%s::{_cast(field)}" for field in fields)
    run_table = AgentRun._meta.db_table
    sql = (
        f'INSERT INTO "{meta.db_table}" ({columns}) SELECT {values} FROM "{run_table}" '  # noqa: S608
        f'WHERE "id" = %s AND "lease_owner" = %s FOR SHARE RETURNING "{meta.pk.column}"'
    )
    return sql, fields


@cache
def _update_sql(model: type[models.Model], names: tuple[str, ...]) -> tuple[str, tuple[models.Field, ...]]:
    meta = model._meta
    fields = tuple(field for name in names if isinstance(field := meta.get_field(name), models.Field))
    assert len(fields) == len(names), f"not concrete fields of {meta.label}: {names}"
    assignments = ", ".join(f'"{field.column}" = %s' for field in fields)
    sql = (
        f'UPDATE "{meta.db_table}" SET {assignments} '  # noqa: S608 (identifiers from the model's metadata)
        f'WHERE "{meta.pk.column}" = %s AND EXISTS ({_lease_condition()})'
    )
    return sql, fields


def insert_fenced(instance: models.Model, *, run_id: int, holder: str) -> bool:
    """Insert `instance` (setting its pk) only while `holder` holds run `run_id`. False, and nothing
    written, when it does not."""
    sql, fields = _insert_sql(type(instance))
    values = [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, run_id, holder])
        row = cursor.fetchone()
    if row is None:
        return False
    instance.pk = row[0]
    instance._state.adding, instance._state.db = False, connection.alias
    return True


def update_fenced(instance: models.Model, names: Sequence[str], *, run_id: int, holder: str) -> bool:
    """Save these fields of `instance` only while `holder` holds run `run_id`. False, and nothing
    written, when it does not."""
    sql, fields = _update_sql(type(instance), tuple(names))
    values = [field.get_db_prep_save(field.pre_save(instance, False), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, instance.pk, run_id, holder])
        return cursor.rowcount == 1
