"""Writes that only happen while a worker holds its run's lease: the fence folded into the write itself.

A worker presumed dead (its heartbeat stalled, the sweeper re-queued its run, another worker claimed
it) may still be running. Checking the lease and then writing would leave a gap between the two; here the
check is part of the write's own statement, one round trip like the plain write it replaces:

    WITH guard AS (SELECT cancel_requested AS answer FROM run WHERE id = %s AND lease_owner = %s FOR SHARE),
         u0 AS (UPDATE step SET ... FROM guard WHERE step.id = %s RETURNING 1),
         i0 AS (INSERT INTO step (...) SELECT %s, ... FROM guard RETURNING id)
    SELECT (SELECT answer FROM guard), (SELECT count(*) FROM u0), (SELECT id FROM i0)

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

from django.db import models

from assistant.models import AgentRun
from assistant.rows import write_together


@cache
def _held() -> str:
    """The guard of every fenced write: the run's row while `holder` holds it, locked, with its cancel flag."""
    table = AgentRun._meta.db_table
    return (
        f'SELECT "cancel_requested" AS "answer" FROM "{table}" '  # noqa: S608 (identifiers from the model)
        'WHERE "id" = %s AND "lease_owner" = %s FOR SHARE'
    )


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
    one statement (assistant/rows.py), only while `holder` holds run `run_id`: all of it, or nothing when it does
    not (`NOT_HELD`, also when an updated row is gone). Several steps written at once cost one round trip and
    one commit.

    `unless_cancelled`: nothing either when the person has asked the run to stop (the answer is then not
    written, and says `cancel_requested`): a run's answer never wins over a Stop sent before it."""
    written = write_together(guard=_held(), guard_params=[run_id, holder], inserts=inserts, updates=updates,
                             condition='NOT "guard"."answer"' if unless_cancelled else "")
    if written.answer is None:
        return NOT_HELD
    if unless_cancelled and written.answer:
        return Fenced(written=False, cancel_requested=True)
    if not all(written.matched):
        return NOT_HELD
    return Fenced(written=True, cancel_requested=bool(written.answer))


def insert_fenced(instance: models.Model, *, run_id: int, holder: str) -> Fenced:
    """Insert `instance` (setting its pk) only while `holder` holds run `run_id`; nothing is written
    when it does not (`NOT_HELD`)."""
    return write_fenced(inserts=[instance], run_id=run_id, holder=holder)


def update_fenced(instance: models.Model, names: Sequence[str], *, run_id: int, holder: str) -> Fenced:
    """Save these fields of `instance` only while `holder` holds run `run_id`; nothing is written when
    it does not (`NOT_HELD`)."""
    return write_fenced(updates=[(instance, names)], run_id=run_id, holder=holder)
