"""A recorded run's quality from an eval: the seed's `qualityScore`, "0–1, if the eval harness scored the run".

The person's thumbs are a run's quality when given. For a run they did not rate, once an eval run has finished,
the judge grades the run's recording against its case's rubric — the recording itself, as the report's
"recorded" baseline grades it, not a candidate's replay — and that grade is the quality of the run's entry in
its profile (source "judge"). A judge that cannot judge (the offline demo model, a scripted one, an unusable
answer) writes nothing: an unjudged run has no quality rather than an invented one. A later eval run judges
again and replaces the grade; the run stays one entry.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import receiver

from assistant.evals.graders import JudgeGrader, Replayed
from assistant.evals.models import EvalCase, EvalResult
from assistant.evals.replays import eval_run_finished
from registry.services import profile_entry_judge

logger = logging.getLogger(__name__)


def case_recording_judged(case: EvalCase) -> float | None:
    """The judge's 0–1 grade of the case's recording against its rubric; None when the case has no rubric or
    the judge could not judge. Calls the judge model: never inside a transaction that holds locks."""
    grade = JudgeGrader().grade(case.expectations or {}, Replayed.of_recording(case.recording or {}))
    if grade is None or grade.passed is None or grade.score is None:
        return None
    return grade.score


def eval_run_quality(eval_run_id: int) -> dict[int, float]:
    """Judge the recorded runs of the finished eval run's cases that their people did not rate, and write each
    grade into its run's profile entry: {recorded run id: the grade written}. A case whose run is gone (pruned,
    imported from another site), whose person gave thumbs, without a rubric, or that the judge could not
    judge, is passed over; one that fails is logged and the others go on."""
    # A case is in the eval run once per candidate: chosen by id, so each is judged once.
    in_run = EvalResult.objects.filter(eval_run_id=eval_run_id).values("case_id")
    cases = EvalCase.objects.filter(pk__in=in_run, source_run__isnull=False).select_related("source_run").order_by("id")
    written: dict[int, float] = {}
    for case in cases:
        run = case.source_run
        if run is None or run.quality_score is not None:  # thumbs win: not even asked of the judge
            continue
        try:
            score = case_recording_judged(case)
            # Thumbs given while the judge thought are kept: the entry's write checks again under its lock.
            if score is not None and profile_entry_judge(owner=run.owner_id, spec_name=run.spec, run_id=run.pk,
                                                         score=score, eval_run_id=eval_run_id):
                written[run.pk] = score
        except Exception:  # one case's judge or entry must not keep the others' quality from being written
            logger.exception("Could not judge the recorded run %s of eval case %s", run.pk, case.pk)
    return written


@receiver(eval_run_finished, dispatch_uid="assistant.evals.quality")
def quality_on_finish(sender: Any, eval_run_id: int, **kwargs: Any) -> None:
    # Sent from a worker's grading or from eval_run_refresh (a command, a page): neither may fail for this.
    try:
        eval_run_quality(eval_run_id)
    except Exception:
        logger.exception("Could not write the judged quality of eval run %s", eval_run_id)
