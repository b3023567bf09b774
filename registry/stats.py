"""Pure projections over an agent profile's rolling window: the derived stats and the one-line summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

TREND_DEADBAND = 0.02

# Where an entry's quality came from. The person's thumbs always win: a judge's grade is the quality only of
# a run the person did not rate (see registry/services.py).
QUALITY_THUMBS = "thumbs"
QUALITY_JUDGE = "judge"
QUALITY_SOURCES = (QUALITY_THUMBS, QUALITY_JUDGE)


def quality_source(entry: dict[str, Any]) -> str | None:
    """Who gave the entry's `quality_score`: "thumbs" or "judge"; None when it has none. An entry filed before
    sources were kept has the thumbs' score: they were the only source then."""
    if entry.get("quality_score") is None:
        return None
    source = entry.get("quality_source")
    return source if source in QUALITY_SOURCES else QUALITY_THUMBS


@dataclass(frozen=True)
class ProfileStats:
    success_rate: float = 0.0
    avg_duration_ms: float = 0.0
    avg_tool_calls: float = 0.0
    avg_quality: float = 0.0
    # How many of the entries behind `avg_quality` each source gave.
    quality_thumbs: int = 0
    quality_judged: int = 0
    error_rate: float = 0.0
    trend: float = 0.0
    sample_size: int = 0
    top_tools: list[tuple[str, int]] = field(default_factory=list)
    top_intents: list[tuple[str, int]] = field(default_factory=list)


def _success_rate(entries: list[dict[str, Any]]) -> float:
    if not entries:
        return 0.0
    return sum(1 for entry in entries if entry.get("status") == "success") / len(entries)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def compute_stats(window: list[dict[str, Any]]) -> ProfileStats:
    """Stats over the window, oldest entry first. `trend` is the second half's success rate minus the
    first half's: positive means the assistant has been getting better for this user."""
    if not window:
        return ProfileStats()
    half = len(window) // 2
    trend = _success_rate(window[half:]) - _success_rate(window[:half]) if half else 0.0
    tools: Counter[str] = Counter()
    intents: Counter[str] = Counter()
    for entry in window:
        tools.update(entry.get("tools_used") or [])
        if entry.get("intent"):
            intents[entry["intent"]] += 1
    qualities = [float(entry["quality_score"]) for entry in window if entry.get("quality_score") is not None]
    sources = Counter(quality_source(entry) for entry in window)
    return ProfileStats(
        success_rate=_success_rate(window),
        avg_duration_ms=_mean([float(entry.get("duration_ms") or 0) for entry in window]),
        avg_tool_calls=_mean([float(entry.get("tool_calls") or 0) for entry in window]),
        avg_quality=_mean(qualities),
        quality_thumbs=sources[QUALITY_THUMBS],
        quality_judged=sources[QUALITY_JUDGE],
        error_rate=sum(1 for entry in window if (entry.get("tool_errors") or 0) > 0) / len(window),
        trend=trend,
        sample_size=len(window),
        top_tools=tools.most_common(10),
        top_intents=intents.most_common(5),
    )


def quality_figure(stats: ProfileStats) -> str:
    """The mean quality and how many entries each source gave, e.g. "0.72 (5 thumbs, 3 judged)"; empty when no
    entry has one (no quality is not a quality of 0)."""
    if not stats.quality_thumbs + stats.quality_judged:
        return ""
    return f"{stats.avg_quality:.2f} ({stats.quality_thumbs} thumbs, {stats.quality_judged} judged)"


def trend_direction(trend: float) -> int:
    """1 improving, -1 getting worse, 0 steady: a change within ±TREND_DEADBAND counts as none."""
    if trend > TREND_DEADBAND:
        return 1
    if trend < -TREND_DEADBAND:
        return -1
    return 0


TREND_ARROWS = {1: "↑", 0: "→", -1: "↓"}
TREND_WORDS = {1: "improving", 0: "steady", -1: "getting worse"}


def format_summary(spec_name: str, invocations: int, stats: ProfileStats) -> str:
    """One line for the system prompt; empty when there is no history, so it is safe to concatenate."""
    if stats.sample_size == 0:
        return ""
    arrow = TREND_ARROWS[trend_direction(stats.trend)]
    line = (
        f'Agent "{spec_name}" — {invocations} prior invocations, {stats.success_rate:.0%} success rate, '
        f"{arrow} {abs(stats.trend):.0%} trend."
    )
    if stats.top_tools:
        line += " Top tools: " + ", ".join(name for name, _ in stats.top_tools[:3]) + "."
    return line
