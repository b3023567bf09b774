"""An eval run's admin page, read from its report (assistant/evals/report.py): the figures in words, each case
with its links (its case, its recorded run, its replay's timeline) and deviations, and a server-drawn chart of
the pass rates, an image with its figures in words beside a table that carries the same numbers."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from assistant.evals.models import EvalCase, EvalResult, EvalRun
from assistant.evals.replays import eval_run_progress
from assistant.evals.report import IMPROVEMENT, REGRESSION, eval_report

#: A case's change in the words (and signs) the page shows: never colour alone.
CHANGE_WORDS = {
    REGRESSION: "▼ regression: passed in the baseline, fails now",
    IMPROVEMENT: "▲ improvement: failed in the baseline, passes now",
}


def percent(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:.0%}"


def verdict(passed: bool | None) -> str:
    return "✓ pass" if passed else ("—" if passed is None else "✗ fail")


def seconds(duration_ms: float | None) -> str:
    return "—" if duration_ms is None else f"{duration_ms / 1000:.1f} s"


def _run_url(run_id: int | None) -> str | None:
    return reverse("admin:assistant_agentrun_change", args=[run_id]) if run_id is not None else None


def _grades(grades: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"grader": grade.get("grader", ""), "verdict": verdict(grade.get("passed")) if grade.get("passed")
             is not None else "not graded", "score": "—" if grade.get("score") is None else f"{grade['score']:.2f}",
             "detail": grade.get("detail") or "", "deviations": grade.get("deviations") or []} for grade in grades]


def _now(row: dict[str, Any]) -> str:
    if row["status"] == EvalResult.Status.PENDING:
        return "replaying…"
    if row["status"] == EvalResult.Status.ERROR:
        return "not replayed"
    return verdict(row["passed"])


def _case_row(row: dict[str, Any], numbers: dict[int, int | None]) -> dict[str, Any]:
    return {
        **row, "now": _now(row), "before": verdict(row["baseline_passed"]), "change_words": CHANGE_WORDS.get(
            row["change"], ""),
        "score_shown": "—" if row["score"] is None else f"{row['score']:.2f}",
        "duration": seconds(row["duration_ms"]), "grades_shown": _grades(row["grades"]),
        "case_url": reverse("admin:assistant_evals_evalcase_change", args=[row["case"]]),
        "recorded_url": _run_url(row["recorded_run"]), "recorded_number": numbers.get(row["case"]),
        "replay_url": _run_url(row["replay_run"]),
    }


def _figures_shown(figures: dict[str, Any]) -> dict[str, Any]:
    return {**figures, "pass_rate_shown": percent(figures["pass_rate"]),
            "baseline_pass_rate_shown": percent(figures["baseline_pass_rate"]),
            "mean_score_shown": "—" if figures["mean_score"] is None else f"{figures['mean_score']:.2f}",
            "median_duration": seconds(figures["median_duration_ms"])}


def pass_rate_chart(summary: list[dict[str, Any]], baseline: str) -> SafeString:
    """Two bars per candidate, the pass rate now and in the baseline, each labelled in words and figures (the
    baseline's bar is outlined, so print and colour-blind eyes tell them apart too)."""
    row_height, label_width, width, top = 22, 190, 600, 6
    plot_width = width - label_width - 70
    bars = [(entry["label"], which, entry["figures"][key]) for entry in summary
            for which, key in (("now", "pass_rate"), ("baseline", "baseline_pass_rate"))]
    height = top * 2 + len(bars) * row_height + (len(summary) - 1) * 8
    body, words, y = [], [], float(top)
    for index, (label, which, rate) in enumerate(bars):
        shown = label if len(label) <= 20 else f"{label[:19]}…"
        body.append(f'<text x="{label_width - 8}" y="{y + 15:.1f}" font-size="13" text-anchor="end" '
                    f'fill="currentColor">{escape(shown)} · {which}</text>')
        size = (rate or 0) * plot_width
        style = ('fill="#2b6cb0"' if which == "now" else
                 'fill="none" stroke="currentColor" stroke-width="1.5" stroke-dasharray="4 2"')
        if size:
            body.append(f'<rect x="{label_width}" y="{y + 3:.1f}" width="{size:.1f}" height="{row_height - 7}" '
                        f"{style}/>")
        body.append(f'<text x="{label_width + size + 6:.1f}" y="{y + 15:.1f}" font-size="13" fill="currentColor">'
                    f"{percent(rate)}</text>")
        words.append(f"{label} {which}: {percent(rate)}")
        y += row_height + (8 if index % 2 else 0)
    title = f"Pass rate of each candidate, now and in the baseline ({baseline})"
    return mark_safe(  # noqa: S308 - every text in it is escaped where it is put in
        f'<svg class="eval-chart" viewBox="0 0 {width} {height:.0f}" preserveAspectRatio="xMinYMin meet" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title + ": " + "; ".join(words))}">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def eval_run_page(eval_run: EvalRun) -> dict[str, Any]:
    """What the eval run's page shows (its template is admin/assistant_evals/evalrun/change_form.html)."""
    done, total = eval_run_progress(eval_run)
    report = eval_report(eval_run)
    numbers = dict(EvalCase.objects.filter(results__eval_run=eval_run).values_list("pk", "source_run_number")
                   .distinct())
    rows = [_case_row(row, numbers) for row in report["cases"]]
    baseline_words = "the recording itself, graded the same way"
    baseline_url = None
    if report["baseline"] != "recorded":
        baseline_words = f"eval run {report['baseline']}"
        baseline_url = reverse("admin:assistant_evals_evalrun_change", args=[int(report["baseline"])])
    summary = [{"label": label, "candidate": next((c for c in report["candidates"] if c["label"] == label), {}),
                "figures": _figures_shown(figures)} for label, figures in report["summary"].items()]
    return {
        "report": report, "done": done, "total": total, "percent": round(100 * done / total) if total else 100,
        "running": eval_run.status == EvalRun.Status.RUNNING,
        "baseline_words": baseline_words, "baseline_url": baseline_url, "summary": summary,
        "chart": pass_rate_chart(summary, baseline_words) if summary else "",
        "graders": [{"grader": name, **figures, "pass_rate_shown": percent(figures["pass_rate"]),
                     "mean_score_shown": "—" if figures["mean_score"] is None else f"{figures['mean_score']:.2f}"}
                    for name, figures in report["graders"].items()],
        "specs": [{"spec": name, **_figures_shown(figures)} for name, figures in sorted(report["specs"].items())],
        "regressions": [row for row in rows if row["change"] == REGRESSION],
        "improvements": [row for row in rows if row["change"] == IMPROVEMENT],
        "others": [row for row in rows if row["change"] not in (REGRESSION, IMPROVEMENT)],
    }
