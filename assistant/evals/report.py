"""An eval run's report: per case and candidate, against the baseline (the recording itself, graded the same
way, or an earlier eval run), with regressions and improvements first; per grader and per spec, pass rates,
mean scores, tokens and durations."""

from __future__ import annotations

from collections import defaultdict
from statistics import mean, median
from typing import Any

from assistant.evals.graders import Replayed, grade_all
from assistant.evals.models import EvalResult, EvalRun

REGRESSION, IMPROVEMENT, SAME = "regression", "improvement", "same"


def _baseline(eval_run: EvalRun) -> dict[int, tuple[bool | None, float | None]]:
    """Each case's baseline pass and score: the recording graded as the replays are, or an earlier eval run's
    results. The recording's grades are kept on the eval run the first time (a judge is a model call each)."""
    if eval_run.baseline != "recorded":
        earlier = EvalResult.objects.filter(eval_run_id=int(eval_run.baseline), status=EvalResult.Status.GRADED)
        return {result.case_id: (result.passed, result.score) for result in earlier.order_by("candidate")}
    kept = {int(case_id): (grades[0], grades[1]) for case_id, grades in (eval_run.baseline_grades or {}).items()}
    cases = {result.case_id: result.case for result in eval_run.results.select_related("case")
             if result.case_id not in kept}
    if cases:
        for case_id, case in cases.items():
            passed, score, _grades = grade_all(case.expectations or {}, Replayed.of_recording(case.recording))
            kept[case_id] = (passed, score)
        eval_run.baseline_grades = {str(case_id): list(grades) for case_id, grades in kept.items()}
        EvalRun.objects.filter(pk=eval_run.pk).update(baseline_grades=eval_run.baseline_grades)
    return kept


def _change(before: bool | None, now: bool | None) -> str:
    if before and now is False:
        return REGRESSION
    if before is False and now:
        return IMPROVEMENT
    return SAME


def eval_report(eval_run: EvalRun) -> dict[str, Any]:
    baseline = _baseline(eval_run)
    rows = []
    for result in eval_run.results.select_related("case", "replay_run").order_by("case_id", "candidate"):
        before_passed, before_score = baseline.get(result.case_id, (None, None))
        deviations = [item for grade in result.grades for item in grade.get("deviations") or []]
        rows.append({
            "case": result.case_id, "question": result.case.question[:120], "spec": result.case.spec,
            "candidate": result.candidate, "status": result.status, "passed": result.passed, "score": result.score,
            "baseline_passed": before_passed, "baseline_score": before_score,
            "change": _change(before_passed, result.passed) if result.status == EvalResult.Status.GRADED else SAME,
            "grades": result.grades, "deviations": deviations, "error": result.error,
            "tokens": result.total_tokens, "duration_ms": result.duration_ms,
            "recorded_run": result.case.source_run_id, "replay_run": result.replay_run_id,
        })
    order = {REGRESSION: 0, IMPROVEMENT: 1, SAME: 2}
    rows.sort(key=lambda row: (order[row["change"]], row["case"], row["candidate"]))
    return {
        "eval_run": eval_run.pk, "set": eval_run.eval_set.name, "status": eval_run.status,
        "baseline": eval_run.baseline, "candidates": eval_run.candidates,
        "summary": {label: _figures([row for row in rows if row["candidate"] == label])
                    for label in [candidate["label"] for candidate in eval_run.candidates]},
        "graders": _by_grader(rows), "specs": {spec: _figures(group) for spec, group in _grouped(rows, "spec").items()},
        "regressions": [row for row in rows if row["change"] == REGRESSION],
        "improvements": [row for row in rows if row["change"] == IMPROVEMENT],
        "cases": rows,
    }


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[str(row[key])].append(row)
    return dict(groups)


def _figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    graded = [row for row in rows if row["status"] == EvalResult.Status.GRADED]
    scores = [row["score"] for row in graded if row["score"] is not None]
    tokens = [row["tokens"] for row in graded if row["tokens"] is not None]
    durations = [row["duration_ms"] for row in graded if row["duration_ms"] is not None]
    return {
        "cases": len(rows), "graded": len(graded), "errors": sum(1 for row in rows if row["status"] == "error"),
        "passed": sum(1 for row in graded if row["passed"]),
        "pass_rate": round(sum(1 for row in graded if row["passed"]) / len(graded), 4) if graded else None,
        "mean_score": round(mean(scores), 4) if scores else None,
        "baseline_pass_rate": (round(sum(1 for row in graded if row["baseline_passed"]) / len(graded), 4)
                               if graded else None),
        "tokens": sum(tokens), "median_duration_ms": median(durations) if durations else None,
        "regressions": sum(1 for row in rows if row["change"] == REGRESSION),
        "improvements": sum(1 for row in rows if row["change"] == IMPROVEMENT),
    }


def _by_grader(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        for grade in row["grades"]:
            found[grade["grader"]].append(grade)
    figures = {}
    for grader, grades in found.items():
        counted = [grade for grade in grades if grade.get("passed") is not None]
        scores = [grade["score"] for grade in counted if grade.get("score") is not None]
        figures[grader] = {"graded": len(counted), "not_graded": len(grades) - len(counted),
                           "pass_rate": round(sum(1 for g in counted if g["passed"]) / len(counted), 4) if counted
                           else None, "mean_score": round(mean(scores), 4) if scores else None}
    return figures


def report_table(report: dict[str, Any]) -> str:
    """The report as a terminal reads it: regressions and improvements first, then every case, then figures."""
    lines = [f"Eval run {report['eval_run']} of {report['set']} ({report['status']}), baseline: {report['baseline']}"]

    def mark(value: bool | None) -> str:
        return "pass" if value else ("—" if value is None else "FAIL")

    lines.append(f"{'case':>6}  {'candidate':<16} {'now':<5} {'score':>6}  {'before':<6} {'change':<12} deviations")
    for row in report["cases"]:
        score = "" if row["score"] is None else f"{row['score']:.2f}"
        detail = "; ".join(row["deviations"])[:100] or row["error"][:100]
        lines.append(f"{row['case']:>6}  {row['candidate'][:16]:<16} {mark(row['passed']):<5} {score:>6}  "
                     f"{mark(row['baseline_passed']):<6} {row['change']:<12} {detail}")
    for label, figures in report["summary"].items():
        rate = "—" if figures["pass_rate"] is None else f"{figures['pass_rate']:.0%}"
        before = "—" if figures["baseline_pass_rate"] is None else f"{figures['baseline_pass_rate']:.0%}"
        lines.append(f"{label}: {figures['passed']}/{figures['graded']} passed ({rate}; baseline {before}), "
                     f"{figures['regressions']} regressions, {figures['improvements']} improvements, "
                     f"{figures['tokens']} tokens, median {figures['median_duration_ms']} ms"
                     + (f", {figures['errors']} not replayed" if figures["errors"] else ""))
    for grader, figures in report["graders"].items():
        rate = "—" if figures["pass_rate"] is None else f"{figures['pass_rate']:.0%}"
        lines.append(f"  {grader}: {rate} of {figures['graded']}"
                     + (f" ({figures['not_graded']} not graded)" if figures["not_graded"] else ""))
    return "\n".join(lines)
