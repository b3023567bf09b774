"""Writes that only happen while a worker holds its run's lease: the fence folded into the write itself.

A worker presumed dead (its heartbeat stalled, the sweeper re-queued its run, another worker claimed
it) may still be running. Checking the lease and then writing would leave a gap between the two; here the
check is part of the write's own statement, one round trip like the plain write it replaces:

    WITH held AS (SELECT cancel_requested FROM run WHERE id = %s AND lease_owner = %s FOR SHARE)
    INSERT INTO step (...) SELECT %s, ... FROM held RETURNING id, (SELECT cancel_requested FROM held)
    WITH held AS (...) UPDATE step SET ... FROM held WHERE step.id = %s RETURNING held.cancel_requested

`FOR SHARE` holds the run row until the write commits, so a claim (an UPDATE of that row) waits for it
and then sees it: a new holder never misses a step the old one wrote just before it lost the lease.

The same statement reads the run's cancel flag, from the row version it locked: a Stop that committed
before the write (or while the write waited for the row) is in the answer. Every step a worker records
passes here, so a turn learns of a cancel at its next write whatever became of the faster Redis flag,
at no cost of its own: a step about to run a tool is written `started` first, and the tool does not run
once that write says the person asked to stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from django.db import connection, models

from assistant.models import AgentRun


def _held_cte() -> str:
    table = AgentRun._meta.db_table
    return (
        f'WITH "held" AS (SELECT "cancel_requested" FROM "{table}" '  # noqa: S608 (identifiers from the model)
        'WHERE "id" = %s AND "lease_owner" = %s FOR SHARE) '
    )


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
    sql = (
        f'{_held_cte()}INSERT INTO "{meta.db_table}" ({columns}) SELECT {values} FROM "held" '  # noqa: S608
        f'RETURNING "{meta.pk.column}", (SELECT "cancel_requested" FROM "held")'
    )
    return sql, fields


@cache
def _update_sql(model: type[models.Model], names: tuple[str, ...]) -> tuple[str, tuple[models.Field, ...]]:
    meta = model._meta
    fields = tuple(field for name in names if isinstance(field := meta.get_field(name), models.Field))
    assert len(fields) == len(names), f"not concrete fields of {meta.label}: {names}"
    assignments = ", ".join(f'"{field.column}" = %s' for field in fields)
    sql = (
        f'{_held_cte()}UPDATE "{meta.db_table}" SET {assignments} FROM "held" '  # noqa: S608 (identifiers from the model's metadata)
        f'WHERE "{meta.db_table}"."{meta.pk.column}" = %s RETURNING "held"."cancel_requested"'
    )
    return sql, fields


@dataclass(frozen=True)
class Fenced:
    """What a fenced write found: whether it was written (the holder still held the run), and the run's
    cancel flag as of that write."""

    written: bool
    cancel_requested: bool = False


NOT_HELD = Fenced(written=False)


def insert_fenced(instance: models.Model, *, run_id: int, holder: str) -> Fenced:
    """Insert `instance` (setting its pk) only while `holder` holds run `run_id`; nothing is written
    when it does not (`NOT_HELD`)."""
    sql, fields = _insert_sql(type(instance))
    values = [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, holder, *values])
        row = cursor.fetchone()
    if row is None:
        return NOT_HELD
    instance.pk = row[0]
    instance._state.adding, instance._state.db = False, connection.alias
    return Fenced(written=True, cancel_requested=bool(row[1]))


def update_fenced(instance: models.Model, names: Sequence[str], *, run_id: int, holder: str) -> Fenced:
    """Save these fields of `instance` only while `holder` holds run `run_id`; nothing is written when
    it does not (`NOT_HELD`)."""
    sql, fields = _update_sql(type(instance), tuple(names))
    values = [field.get_db_prep_save(field.pre_save(instance, False), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, holder, *values, instance.pk])
        row = cursor.fetchone()
    return NOT_HELD if row is None else Fenced(written=True, cancel_requested=bool(row[0]))
