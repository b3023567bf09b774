"""What tracing costs a turn: the whole-turn time of `bench_turn` (send → replied, three tool calls, a real worker)
with tracing off, and with the web side and the worker exporting the assistant's spans over OTLP/HTTP to a real
receiver running beside them, in alternating blocks of one sitting. Goal: tracing on ≤ 1.05× the turn's median off.
(The site's own Django and psycopg spans, which config/tracing.py adds when tracing is on, are the site's cost:
left out here with OpenTelemetry's OTEL_PYTHON_DISABLED_INSTRUMENTATIONS.)"""

from __future__ import annotations

import asyncio
import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks import percentile
from benchmarks.bench_turn import _time_turns, interleaved_blocks, three_tool_world

GOAL_RATIO = 1.05
PER_BLOCK = 12
ROUNDS = 5


@contextmanager
def _traced_here(endpoint: str | None) -> Iterator[None]:
    """This process's tracing on (to `endpoint`) or off, for the sends made here."""
    from assistant.tracing import flush, tracing_enabled

    before = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if endpoint:
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
    else:
        os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    tracing_enabled.cache_clear()
    try:
        yield
    finally:
        flush()  # the sends' spans go now, to the receiver that is still there
        if before is None:
            os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        else:
            os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = before
        tracing_enabled.cache_clear()


def main() -> None:
    from assistant.testing.otlp_receiver import OTLPReceiver
    from benchmarks.load import celery_worker

    with three_tool_world("bench_tracing") as (user, calls, sent_from, database_url), OTLPReceiver() as receiver:
        untraced = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
        env = {**untraced, "DATABASE_URL": database_url}
        # The assistant's own spans: the site's Django and psycopg instrumentations (config/tracing.py) are left
        # out, as their spans are the site's, there whether the assistant traces or not.
        traced_env = {**env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
                      "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "django,psycopg"}

        def block(worker_env: dict[str, str], endpoint: str | None) -> Any:
            def run(warmup: int) -> tuple[list[float], list[float]]:
                with celery_worker(worker_env), _traced_here(endpoint):
                    return asyncio.run(_time_turns(user, calls, sent_from, runs=PER_BLOCK, warmup=warmup,
                                                   print_phases=False))
            return run

        off, on, bare, shares = interleaved_blocks(block(env, None), block(traced_env, receiver.endpoint),
                                                   names=("off", "on"), rounds=ROUNDS)
        spans = len(receiver.spans)
    off_p50, on_p50 = statistics.median(off), statistics.median(on)
    ratio = on_p50 / off_p50
    print(f"turn, tracing off ({len(off)} turns): p50 {off_p50:.1f} ms, p95 {percentile(off, 0.95):.1f} ms")
    print(f"turn, tracing on  ({len(on)} turns): p50 {on_p50:.1f} ms, p95 {percentile(on, 0.95):.1f} ms; "
          f"{spans} spans received")
    print(f"the 3 tool calls alone: p50 {statistics.median(bare):.1f} ms")
    print(f"ratio on / off at the median: {ratio:.3f} (rounds' extra / overhead {min(shares):.2f}–{max(shares):.2f}); "
          f"goal ≤ {GOAL_RATIO}: {'met' if ratio <= GOAL_RATIO else 'NOT met'}")
