"""Several rows written in one statement, behind one guard: one round trip and one commit instead of one each.

A hot path that writes a few rows at once (a send's chat, run and message; a worker's step outcome and the
next step; a run's end with its last step and reply) writes them as data-modifying CTEs of one statement:

    WITH "guard" AS (SELECT ... AS "answer" ...),
         "u0" AS (UPDATE step SET ... FROM "guard" WHERE step.id = %s [AND condition] RETURNING 1),
         "i0" AS (INSERT INTO chat (...) SELECT %s, ... FROM "guard" [WHERE condition] RETURNING id),
         "i1" AS (INSERT INTO run (..., chat_id, ...) SELECT ..., (SELECT id FROM "i0"), ... FROM "guard" ...)
    SELECT (SELECT "answer" FROM "guard"), (SELECT count(*) FROM "u0"), (SELECT id FROM "i0"), ...

The guard is a query of one row or none: nothing is written without its row, and its `answer` is the
caller's (NULL without the row). A row to insert whose foreign key names another row of the same write (a
run's chat made in the same send) gets that row's new key in the statement. Values are prepared by each
field as `Model.save()` prepares them (`pre_save`, `get_db_prep_save`); no signals are sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection, models
from django.db.backends.utils import CursorWrapper

try:  # Django's PostgreSQL backend runs on psycopg 3 whenever it is installed
    import psycopg
except ImportError:  # psycopg2: Django's own cursor
    psycopg = None  # type: ignore[assignment]

#: The guard of a write that nothing stops (its rows are checked before, under the caller's locks).
WRITE_ALWAYS = 'SELECT true AS "answer"'
# An insert's foreign key to another insert of the same write: (the field's name, that insert's place).
Links = tuple[tuple[str, int], ...]
Shape = tuple[str, str, tuple[tuple[type[models.Model], tuple[str, ...]], ...],
              tuple[tuple[type[models.Model], Links], ...]]


@dataclass(frozen=True)
class Written:
    """What the guard answered (None: it had no row, and nothing was written), and how many rows each update
    matched."""

    answer: Any
    matched: tuple[int, ...] = ()


def _cast(field: models.Field) -> str:
    # Text keeps its own column's length check (a cast to varchar(n) would cut silently instead).
    if isinstance(field, models.CharField | models.TextField):
        return "text"
    return str(field.cast_db_type(connection))


@cache
def _fields_of(model: type[models.Model], names: tuple[str, ...] | None) -> tuple[models.Field, ...]:
    """The columns a write sets: every concrete one but the key for an insert (`names` None), else those named."""
    meta = model._meta
    if names is None:
        return tuple(field for field in meta.concrete_fields if not field.primary_key)
    fields = tuple(field for name in names if isinstance(field := meta.get_field(name), models.Field))
    assert len(fields) == len(names), f"not concrete fields of {meta.label}: {names}"
    return fields


def _links(instance: models.Model, earlier: Sequence[models.Model]) -> Links:
    """The foreign keys of `instance` that name a row inserted before it in the same write (by identity)."""
    found = []
    for field in _fields_of(type(instance), None):
        if field.is_relation and field.is_cached(instance):  # type: ignore[attr-defined]
            related = field.get_cached_value(instance)  # type: ignore[attr-defined]
            place = next((number for number, row in enumerate(earlier) if row is related), None)
            if place is not None:
                found.append((field.name, place))
    return tuple(found)


if psycopg is not None:
    class _ParametersApart(psycopg.Cursor):
        """Sends the values apart from the statement, never as a prepared statement (a pooler in transaction
        mode, such as PgBouncer, does not keep those between transactions)."""

        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None,
                    binary: bool | None = None) -> Any:
            return super().execute(query, params, prepare=False, binary=binary)


def _cursor() -> CursorWrapper:
    """A cursor for one of these writes. With psycopg 3, whose cursors Django makes to quote every value into
    the statement's text (client-side binding), one that sends the values apart: a write of a few rows has
    dozens of them, and quoting them costs a fifth of the write (measured: 0.77 → 0.59 ms of the process's
    time for a model's answer and the call it asks for). The statements cast every value they insert, so
    the server needs no text to infer their types from. Django's own cursor where queries are logged
    (DEBUG, a test capturing them): its log shows each statement with its values."""
    if psycopg is None or connection.queries_logged or \
            connection.settings_dict["OPTIONS"].get("server_side_binding") is True:
        return connection.cursor()
    # What Django's own `connection.cursor()` does around the cursor it makes.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        raw = _ParametersApart(connection.connection)
    return connection.make_cursor(raw)  # type: ignore[arg-type]  # the stubs name the wrapper; Django passes a raw cursor


@cache
def _sql(shape: Shape) -> str:
    guard, condition, updates, inserts = shape
    parts, answers = [f'"guard" AS ({guard})'], ['(SELECT "answer" FROM "guard")']
    for number, (model, names) in enumerate(updates):
        meta = model._meta
        assignments = ", ".join(f'"{field.column}" = %s' for field in _fields_of(model, names))
        parts.append(
            f'"u{number}" AS (UPDATE "{meta.db_table}" SET {assignments} FROM "guard" '  # noqa: S608 (identifiers from the models' metadata)
            f'WHERE "{meta.db_table}"."{meta.pk.column}" = %s{f" AND {condition}" if condition else ""} RETURNING 1)'
        )
        answers.append(f'(SELECT count(*) FROM "u{number}")')  # noqa: S608 (a name made here)
    for number, (model, links) in enumerate(inserts):
        meta = model._meta
        fields = _fields_of(model, None)
        linked = dict(links)
        columns = ", ".join(f'"{field.column}"' for field in fields)
        # Each value is cast to its column's type: in INSERT … SELECT the target does not type the parameters.
        values = ", ".join(
            f'(SELECT "{inserts[linked[field.name]][0]._meta.pk.column}" FROM "i{linked[field.name]}")'  # noqa: S608
            if field.name in linked else f"%s::{_cast(field)}"
            for field in fields
        )
        parts.append(
            f'"i{number}" AS (INSERT INTO "{meta.db_table}" ({columns}) SELECT {values} FROM "guard"'  # noqa: S608
            f'{f" WHERE {condition}" if condition else ""} RETURNING "{meta.pk.column}")'
        )
        answers.append(f'(SELECT "{meta.pk.column}" FROM "i{number}")')  # noqa: S608 (identifiers, a name made here)
    return f'WITH {", ".join(parts)} SELECT {", ".join(answers)}'


def write_together(*, guard: str, guard_params: Sequence[Any], condition: str = "",
                   inserts: Sequence[models.Model] = (),
                   updates: Sequence[tuple[models.Model, Sequence[str]]] = ()) -> Written:
    """Save the `updates` (an instance and the fields to save) and insert the `inserts` (setting their keys) in
    one statement, only when `guard` (a query selecting at most one row, with a column "answer") has its row
    and, given a `condition` (SQL on "guard"), that holds. Returns the guard's answer and what each update
    matched; the inserts' keys are set only when their rows were written."""
    linked = [_links(instance, inserts[:number]) for number, instance in enumerate(inserts)]
    shape: Shape = (guard, condition, tuple((type(instance), tuple(names)) for instance, names in updates),
                    tuple((type(instance), links) for instance, links in zip(inserts, linked, strict=True)))
    params: list[Any] = list(guard_params)
    for instance, names in updates:
        fields = _fields_of(type(instance), tuple(names))
        params += [field.get_db_prep_save(field.pre_save(instance, False), connection) for field in fields]
        params.append(instance.pk)
    for instance, links in zip(inserts, linked, strict=True):
        skipped = {name for name, _ in links}
        params += [field.get_db_prep_save(field.pre_save(instance, True), connection)
                   for field in _fields_of(type(instance), None) if field.name not in skipped]
    with _cursor() as cursor:
        cursor.execute(_sql(shape), params)
        row = cursor.fetchone()
    answer, matched, keys = row[0], tuple(row[1:1 + len(updates)]), row[1 + len(updates):]
    for instance, links, key in zip(inserts, linked, keys, strict=True):
        if key is None:
            continue
        instance.pk = key
        instance._state.adding, instance._state.db = False, connection.alias
        for name, place in links:  # the key the row was given in the statement, as save() would have set it
            (field,) = _fields_of(type(instance), (name,))
            setattr(instance, field.attname, inserts[place].pk)
    return Written(answer=answer, matched=matched)
