"""Writes that only happen while a worker holds its run's lease: the fence folded into the write itself.

A worker presumed dead (its heartbeat stalled, the sweeper re-queued its run, another worker claimed
it) may still be running. Checking the lease and then writing would leave a gap between the two; here the
check is part of the write's own statement, one round trip like the plain write it replaces:

    WITH held AS (SELECT cancel_requested FROM run WHERE id = %s AND lease_owner = %s FOR SHARE),
         u0 AS (UPDATE step SET ... FROM held WHERE step.id = %s RETURNING 1),
         i0 AS (INSERT INTO step (...) SELECT %s, ... FROM held RETURNING id)
    SELECT (SELECT cancel_requested FROM held), (SELECT count(*) FROM u0), (SELECT id FROM i0)

Several writes that follow each other with nothing in between (a tool's outcome and the next tool's start,
a model's answer and the first call it asks for) go in one such statement: one round trip and one commit.

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


def _fields_of(model: type[models.Model], names: tuple[str, ...] | None) -> tuple[models.Field, ...]:
    """The columns a write sets: every concrete one but the key for an insert (`names` None), else those named."""
    meta = model._meta
    if names is None:
        return tuple(field for field in meta.concrete_fields if not field.primary_key)
    fields = tuple(field for name in names if isinstance(field := meta.get_field(name), models.Field))
    assert len(fields) == len(names), f"not concrete fields of {meta.label}: {names}"
    return fields


Shape = tuple[tuple[type[models.Model], ...], tuple[tuple[type[models.Model], tuple[str, ...]], ...], bool]


@cache
def _write_sql(shape: Shape) -> str:
    """One statement for the updates and inserts of `shape`, each a data-modifying CTE that acts only when the
    lease CTE found the run held (and, `unless_cancelled`, not asked to stop); it answers the run's cancel flag
    (NULL: not held), how many rows each update matched, and each insert's new key."""
    inserts, updates, unless_cancelled = shape
    condition = ' WHERE NOT "held"."cancel_requested"' if unless_cancelled else ""
    parts, answers = [], ['(SELECT "cancel_requested" FROM "held")']
    for number, (model, names) in enumerate(updates):
        meta = model._meta
        assignments = ", ".join(f'"{field.column}" = %s' for field in _fields_of(model, names))
        parts.append(
            f'"u{number}" AS (UPDATE "{meta.db_table}" SET {assignments} FROM "held" '  # noqa: S608 (identifiers from the model's metadata)
            f'WHERE "{meta.db_table}"."{meta.pk.column}" = %s{condition.replace(" WHERE", " AND")} RETURNING 1)'
        )
        answers.append(f'(SELECT count(*) FROM "u{number}")')  # noqa: S608 (a name made here)
    for number, model in enumerate(inserts):
        meta = model._meta
        fields = _fields_of(model, None)
        columns = ", ".join(f'"{field.column}"' for field in fields)
        # Each value is cast to its column's type: in INSERT … SELECT the target does not type the parameters.
        values = ", ".join(f"%s::{_cast(field)}" for field in fields)
        parts.append(
            f'"i{number}" AS (INSERT INTO "{meta.db_table}" ({columns}) SELECT {values} FROM "held"{condition} '  # noqa: S608
            f'RETURNING "{meta.pk.column}")'
        )
        answers.append(f'(SELECT "{meta.pk.column}" FROM "i{number}")')  # noqa: S608 (identifiers, a name made here)
    return f'{_held_cte()}, {", ".join(parts)} SELECT {", ".join(answers)}'


@dataclass(frozen=True)
class Fenced:
    """What a fenced write found: whether it was written (the holder still held the run, and for a write
    `unless_cancelled`, nobody had asked it to stop), and the run's cancel flag as of that write."""

    written: bool
    cancel_requested: bool = False


NOT_HELD = Fenced(written=False)


def write_fenced(*, inserts: Sequence[models.Model] = (),
                 updates: Sequence[tuple[models.Model, Sequence[str]]] = (), run_id: int, holder: str,
                 unless_cancelled: bool = False) -> Fenced:
    """Save the `updates` (an instance and the fields to save) and insert the `inserts` (setting their keys), in
    one statement, only while `holder` holds run `run_id`: all of it, or nothing when it does not (`NOT_HELD`,
    also when an updated row is gone). Several steps written at once cost one round trip and one commit.

    `unless_cancelled`: nothing either when the person has asked the run to stop (the answer is then not
    written, and says `cancel_requested`): a run's answer never wins over a Stop sent before it."""
    shape: Shape = (tuple(type(instance) for instance in inserts),
                    tuple((type(instance), tuple(names)) for instance, names in updates), unless_cancelled)
    params: list[object] = [run_id, holder]
    for instance, names in updates:
        fields = _fields_of(type(instance), tuple(names))
        params += [field.get_db_prep_save(field.pre_save(instance, False), connection) for field in fields]
        params.append(instance.pk)
    for instance in inserts:
        fields = _fields_of(type(instance), None)
        params += [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(_write_sql(shape), params)
        row = cursor.fetchone()
    cancel_requested, matched, keys = row[0], row[1:1 + len(updates)], row[1 + len(updates):]
    if cancel_requested is None:
        return NOT_HELD
    if unless_cancelled and cancel_requested:
        return Fenced(written=False, cancel_requested=True)
    if not all(matched):
        return NOT_HELD
    for instance, key in zip(inserts, keys, strict=True):
        instance.pk = key
        instance._state.adding, instance._state.db = False, connection.alias
    return Fenced(written=True, cancel_requested=bool(cancel_requested))


def insert_fenced(instance: models.Model, *, run_id: int, holder: str) -> Fenced:
    """Insert `instance` (setting its pk) only while `holder` holds run `run_id`; nothing is written
    when it does not (`NOT_HELD`)."""
    return write_fenced(inserts=[instance], run_id=run_id, holder=holder)


def update_fenced(instance: models.Model, names: Sequence[str], *, run_id: int, holder: str) -> Fenced:
    """Save these fields of `instance` only while `holder` holds run `run_id`; nothing is written when
    it does not (`NOT_HELD`)."""
    return write_fenced(updates=[(instance, names)], run_id=run_id, holder=holder)
