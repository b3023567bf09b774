"""Which worker holds a run. A worker claims a run with a short lease and renews it from a heartbeat
thread while it lives; a run whose lease ran out belongs to a dead worker and may be taken up again.

This is what makes redelivery safe: Celery may hand the same run to two workers (late acknowledgement,
the sweeper re-enqueueing), but only the one whose conditional UPDATE wins works on it. The holder string
is also a fencing token: a worker presumed dead that goes on anyway (a long pause, a partition) cannot
write, because every write of a turn only happens while the run's `lease_owner` is still its holder
(`write_fenced`, below).

The fence is folded into the write itself. A worker presumed dead (its heartbeat stalled, the sweeper
re-queued its run, another worker claimed it) may still be running. Checking the lease and then writing
would leave a gap between the two; here the check is part of the write's own statement (assistant/runs/rows.py),
one round trip like the plain write it replaces:

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

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from django.db import close_old_connections, connection, models
from django.utils import timezone

from assistant.conf import assistant_settings
from assistant.models import AgentRun
from assistant.runs.rows import write_together

logger = logging.getLogger(__name__)


def configured_lease_seconds() -> float:
    """How long a claim or a renewal holds the run (the LEASE_SECONDS setting)."""
    return float(assistant_settings.LEASE_SECONDS)


# A worker stops acting on a run when this share of its lease is still left, so that no other worker can
# take the run over while this one still works on it (the clocks of two hosts may differ a little).
LEASE_SAFETY_FRACTION = 0.2


class LeaseLost(Exception):
    """This worker no longer holds the run (another one took it over, or the lease could not be renewed
    in time): it must stop touching it. Every write of a turn is fenced by the lease and raises this
    instead of changing anything."""


def new_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _above_stopped(table: str, alias: str) -> str:
    """SQL, true when the run that asked run `alias` (its parent) was asked to stop or has ended: a member
    works only for a request that goes on. A Stop flags every run of the tree it finds; a member started
    while it was being sent has a flagged (or ended) parent, so reading the parent, beside the run's own
    flag, is enough at every depth (see assistant/turn/handoff.py for how a member's start is fenced)."""
    return (f'EXISTS (SELECT 1 FROM "{table}" "above" WHERE "above"."id" = "{alias}"."parent_id" '  # noqa: S608
            'AND ("above"."cancel_requested" OR "above"."finished_at" IS NOT NULL))')


@cache
def _claim_sql() -> str:
    # The conditional UPDATE and the read of the claimed row in one statement (RETURNING): the ORM's
    # update() returns only a count, and a second query would cost a round trip plus its compilation
    # on every turn. Column names come from the model, so this follows renames.
    meta = AgentRun._meta
    columns = ", ".join(f'"{field.column}"' for field in meta.concrete_fields)
    # Identifiers come from the model's own metadata; every value is a parameter.
    table = meta.db_table
    above_stopped = _above_stopped(table, table)
    return (
        f'UPDATE "{table}" SET "status" = %s, "lease_owner" = %s, "lease_expires_at" = %s, '  # noqa: S608
        '"attempts" = "attempts" + 1, "started_at" = COALESCE("started_at", %s), '
        '"clock_started_at" = COALESCE("clock_started_at", %s) '
        'WHERE "id" = %s AND "status" IN (%s, %s) AND ("lease_expires_at" IS NULL OR "lease_expires_at" < %s) '
        f'RETURNING {columns}, {above_stopped} AS "above_stopped"'
    )


def lease_claim(run_id: int, holder: str, *, lease_seconds: float | None = None) -> AgentRun | None:
    """Take the run if it is queued, or running under an expired lease. Returns it, or None if not ours.

    `holder` is the fencing token: every later write of the turn only happens while the run's
    `lease_owner` is still this string, and a later claim replaces it. The run returned says, as
    `above_stopped`, whether the run that asked it was asked to stop (or ended) by then: it then begins
    nothing."""
    now = timezone.now()
    if lease_seconds is None:
        lease_seconds = configured_lease_seconds()
    params = [
        AgentRun.Status.RUNNING, holder, now + timedelta(seconds=lease_seconds), now, now,
        run_id, AgentRun.Status.QUEUED, AgentRun.Status.RUNNING, now,
    ]
    return next(iter(AgentRun.objects.raw(_claim_sql(), params)), None)


def lease_release(run_id: int, holder: str) -> None:
    AgentRun.objects.filter(pk=run_id, lease_owner=holder).update(lease_owner="", lease_expires_at=None)


class Heartbeat:
    """Renews the lease every third of its length until stopped, and says whether this worker may still
    act on the run.

    `lost` is set once another holder took the run, or once the lease could not be renewed before it
    would run out (the database is unreachable): the worker then stops before another worker could claim
    the run. A failed renewal is retried until then, so a brief outage costs nothing. `holds()` also
    answers False past that moment when the heartbeat itself is stuck in a hanging call. `cancelled` is set
    once the database says the user stopped the run (the loop watches the faster Redis flag; this is the
    backstop when that flag was lost).
    """

    def __init__(self, run_id: int, holder: str, *, lease_seconds: float | None = None) -> None:
        self.run_id, self.holder = run_id, holder
        self.lease_seconds = configured_lease_seconds() if lease_seconds is None else lease_seconds
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._stop = threading.Event()
        # The claim has just written an expiry `lease_seconds` from now.
        self._acting_deadline = self._deadline_after(time.monotonic())
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)

    def _deadline_after(self, renewed_at: float) -> float:
        return renewed_at + self.lease_seconds * (1 - LEASE_SAFETY_FRACTION)

    def holds(self) -> bool:
        """May this worker still act on the run? False once lost, or past the last renewal's deadline."""
        return not self.lost.is_set() and time.monotonic() < self._acting_deadline

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        interval = self.lease_seconds / 3
        try:
            while not self._stop.wait(interval):
                attempted_at = time.monotonic()
                try:
                    held = self._renew()
                except Exception:
                    logger.warning("Lease heartbeat for run %s could not renew", self.run_id, exc_info=True)
                    connection.close()  # the next attempt starts on a fresh connection
                    left = self._acting_deadline - time.monotonic()
                    if left <= 0:
                        logger.error("Run %s: its lease could not be renewed in time; this worker stops", self.run_id)
                        self.lost.set()
                        return
                    interval = min(self.lease_seconds / 10, left)
                    continue
                if held is None:
                    self.lost.set()
                    return
                self._acting_deadline = self._deadline_after(attempted_at)
                interval = self.lease_seconds / 3
                if held:
                    self.cancelled.set()
        finally:
            close_old_connections()
            connection.close()

    def _renew(self) -> bool | None:
        """Extend the lease if this holder still has it: None when it does not, else the run's cancel flag."""
        expires = timezone.now() + timedelta(seconds=self.lease_seconds)
        with connection.cursor() as cursor:
            cursor.execute(_renew_sql(), [expires, self.run_id, self.holder])
            row = cursor.fetchone()
        return None if row is None else bool(row[0])


@cache
def _renew_sql() -> str:
    # One statement renews and reads the cancel flag (the ORM's update() returns only a count), the flag of
    # the run that asked this one included: a member streaming its model's answer hears of a Stop here too.
    table = AgentRun._meta.db_table
    above_stopped = _above_stopped(table, table)
    return (
        f'UPDATE "{table}" SET "lease_expires_at" = %s '  # noqa: S608 (identifiers from the model's metadata)
        f'WHERE "id" = %s AND "lease_owner" = %s RETURNING "cancel_requested" OR {above_stopped}'
    )


# --- writes fenced by the lease -------------------------------------------------------------------


@cache
def _held() -> str:
    """The guard of every fenced write: the run's row while `holder` holds it, locked, with its cancel flag
    (true too when the run that asked it was asked to stop, or ended)."""
    table = AgentRun._meta.db_table
    return (
        f'SELECT "run"."cancel_requested" OR {_above_stopped(table, "run")} AS "answer" '  # noqa: S608
        f'FROM "{table}" "run" WHERE "run"."id" = %s AND "run"."lease_owner" = %s FOR SHARE OF "run"'
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
    one statement (assistant/runs/rows.py), only while `holder` holds run `run_id`: all of it, or nothing when it does
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
