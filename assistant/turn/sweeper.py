"""Finds runs that lost their worker and puts them back to work, and ends runs stuck past their time.

Every worker runs this every few seconds (see assistant/tasks.py). It is safe to run anywhere and
concurrently: re-enqueueing a run only gives workers a chance to claim it, and the lease decides who
does. A run goes back on the queue at most once per lease period in all: the sweep that stamps the
run's `requeued_at` (a conditional update on locked rows) enqueues it, and the others skip it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from assistant.channel_policies import channel_policies
from assistant.conf import assistant_settings
from assistant.infra.worker_queue import worker_queue
from assistant.models import AgentRun
from assistant.runs.lease import configured_lease_seconds
from assistant.runs.lifecycle import run_finish, run_parents_wake_due, run_setting
from assistant.runs.profile import run_profile_record

logger = logging.getLogger(__name__)

# Past its wall-time limit plus this, a working run is over, whatever its worker thinks.
WALL_GRACE_SECONDS = 30
# At most this many runs go back on the queue per sweep; the next sweep takes the rest.
REQUEUE_BATCH = 100


def sweep_runs() -> dict[str, list[int]]:
    """Returns the ids it re-enqueued and the ids it timed out."""
    now = timezone.now()
    timed_out = _time_out_stuck_runs(now) + _expire_client_approvals(now)
    requeued = _requeue_lost_runs(now) + _wake_runs_whose_members_ended()
    _record_unrecorded_runs()
    if requeued or timed_out:
        logger.info("Swept runs: re-enqueued %s, timed out %s", requeued, timed_out)
    return {"requeued": requeued, "timed_out": timed_out}


def _time_out_stuck_runs(now: datetime) -> list[int]:
    stuck_ids = []
    for run in AgentRun.objects.filter(status=AgentRun.Status.RUNNING).only("pk", "config", "clock_started_at"):
        limit = float(run_setting(run, "MAX_WALL_SECONDS"))
        if run.clock_started_at and now - run.clock_started_at > timedelta(seconds=limit + WALL_GRACE_SECONDS):
            stuck_ids.append(run.pk)
    timed_out = []
    for run_id in stuck_ids:
        with transaction.atomic():
            stuck = AgentRun.objects.select_for_update(skip_locked=True).filter(pk=run_id, status="running").first()
            if stuck is not None:
                run_finish(run=stuck, status=AgentRun.Status.TIMED_OUT, stop_reason=AgentRun.StopReason.SWEPT,
                           error="The assistant took too long on this request and was stopped.")
                timed_out.append(run_id)
    return timed_out


def _expire_client_approvals(now: datetime) -> list[int]:
    """End the runs that waited for approval longer than their channel lets them (its policy's
    `approval_seconds`: the person's own agent's calls, MCP_APPROVAL_SECONDS): answered or not, the agent that
    asked has not called again, and an approval is for the call it was asked about, then. No worker holds
    them: nothing else would end them. A panel's run waits for its person as long as it takes."""
    expired: list[int] = []
    for policy in channel_policies():
        if policy.approval_seconds is None:
            continue
        horizon = now - timedelta(seconds=float(policy.approval_seconds()))
        with transaction.atomic():
            waiting = AgentRun.objects.select_for_update(skip_locked=True).filter(
                channel=policy.value, status=AgentRun.Status.AWAITING_CONFIRMATION, created_at__lt=horizon
            ).order_by("pk")[:REQUEUE_BATCH]
            for run in waiting:
                run_finish(run=run, status=AgentRun.Status.CANCELLED, stop_reason=AgentRun.StopReason.EXPIRED,
                           error=policy.approval_expired)
                expired.append(run.pk)
    return expired


def _requeue_lost_runs(now: datetime) -> list[int]:
    period = timedelta(seconds=configured_lease_seconds())
    # A queued run that no worker has claimed for this long was probably lost from the broker. It
    # counts from when it was queued: its creation, or the answer to a confirmation that queued it again.
    queued_grace = timedelta(seconds=float(assistant_settings.QUEUED_GRACE_SECONDS))
    lost = (
        Q(status=AgentRun.Status.RUNNING, lease_expires_at__lt=now)
        | Q(status=AgentRun.Status.QUEUED, lease_expires_at__isnull=True, queued_since__lt=now - queued_grace)
    ) & (Q(requeued_at__isnull=True) | Q(requeued_at__lte=now - period))
    with transaction.atomic():
        # Rows another sweep holds are skipped: that sweep is stamping them, and they are its to enqueue.
        due = list(
            AgentRun.objects.select_for_update(skip_locked=True)
            .annotate(queued_since=Coalesce("clock_started_at", "created_at"))
            .filter(lost).order_by("pk").values_list("pk", flat=True)[:REQUEUE_BATCH]
        )
        AgentRun.objects.filter(pk__in=due).update(requeued_at=now)
    requeued: list[int] = []
    for run_id in due:
        try:
            worker_queue().run_turn_again(run_id)
        except Exception:
            # The broker is unreachable: give back the stamps of what was not enqueued, so the next sweep
            # tries again instead of waiting out a period, and stop asking a broker that is not there.
            logger.exception("Could not re-enqueue runs %s", due[len(requeued):])
            AgentRun.objects.filter(pk__in=due[len(requeued):], requeued_at=now).update(requeued_at=None)
            break
        requeued.append(run_id)
    return requeued


def _wake_runs_whose_members_ended() -> list[int]:
    """Put back on the queue the runs that wait for members none of which is still at work: the worker of
    the last one died before it woke them, or this sweeper ended it (assistant/turn/handoff.py)."""

    woken = run_parents_wake_due()
    for run_id in woken:
        try:
            worker_queue().run_turn_again(run_id)
        except Exception:  # queued, so the lost-run sweep takes it up once the broker is back
            logger.exception("Could not enqueue run %s, woken for its members' answers", run_id)
            break
    return woken


def _record_unrecorded_runs() -> list[int]:
    """File in their profiles the ended runs whose entry could not be written when they ended (a failed
    write is rolled back alone, so the run still ended: see assistant/runs/profile.py). Normally none."""
    recorded: list[int] = []
    with transaction.atomic():
        # Locked like the end of a run, so racing sweeps never file one twice.
        runs = list(
            AgentRun.objects.select_for_update(skip_locked=True)
            .filter(profile_recorded_at__isnull=True).exclude(status__in=AgentRun.ACTIVE_STATUSES)
            .order_by("pk")[:REQUEUE_BATCH]
        )
        for run in runs:
            AgentRun.objects.filter(pk=run.pk).update(profile_recorded_at=timezone.now())
            if run_profile_record(run, list(run.steps.all())):
                recorded.append(run.pk)
    if recorded:
        logger.info("Filed in their profiles the ended runs %s", recorded)
    return recorded
