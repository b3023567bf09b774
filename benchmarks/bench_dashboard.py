"""The admin dashboard's reads on 50,000 runs (150,000 tool-call steps) spread over a year, in a throwaway
database: the figures for 14 days, 90 days and a year, and the whole page as staff get it, against a
baseline of counting the same runs. Target: the 14-day page under 200 ms.
"""

from __future__ import annotations

import datetime
import statistics
import time
from collections.abc import Callable
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

RUNS = 50_000
DAYS = 365
REPEATS = 15
TARGET_PAGE_MS = 200.0


def _fill() -> None:
    """RUNS runs in 100 chats over DAYS days: mostly succeeded, some failed, timed out and cancelled, three
    tool calls each, one call in ten failing; feedback on one run in five."""
    owner = get_user_model().objects.create_user(username="owner")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_agentchat (owner_id, spec, title, created_at, updated_at, last_activity_at) "
            "SELECT %s, 'default', 'c' || n, now(), now(), now() FROM generate_series(1, 100) n", [owner.pk])
        cursor.execute("""
            INSERT INTO assistant_agentrun (owner_id, chat_id, spec, model, status, reply, error, prompt_tokens,
                completion_tokens, total_tokens, model_calls, tool_calls, tool_errors, intent, quality_score,
                feedback_comment, stop_reason, config, cancel_requested, lease_owner, attempts, session_digest,
                session_sealed, client_origin, created_at, duration_ms)
            SELECT %s, (SELECT min(id) FROM assistant_agentchat) + n %% 100,
                   CASE WHEN n %% 7 = 0 THEN 'reader' ELSE 'default' END, 'offline',
                   CASE WHEN n %% 20 = 0 THEN 'failed' WHEN n %% 31 = 0 THEN 'timed_out'
                        WHEN n %% 43 = 0 THEN 'cancelled' ELSE 'succeeded' END,
                   'ok', CASE WHEN n %% 20 = 0 THEN 'provider error ' || (n %% 5) ELSE '' END, 0, 0,
                   n %% 3000, 2, 3, 0, '',
                   CASE WHEN n %% 5 = 0 THEN (n %% 2)::float WHEN n %% 5 = 1 THEN NULL ELSE NULL END,
                   '', CASE WHEN n %% 20 = 0 THEN 'model_error' WHEN n %% 31 = 0 THEN 'wall_time' ELSE '' END,
                   '{}', false, '', 1, '', '', '',
                   now() - (n %% %s) * interval '1 day' - (n %% 86400) * interval '1 second', 200 + n %% 9000
            FROM generate_series(1, %s) n""", [owner.pk, DAYS, RUNS])
        cursor.execute("""
            INSERT INTO assistant_agentstep (run_id, seq, kind, state, tool_name, call_id, confirmation,
                arguments, result, took_effect, reason, summary, prompt_tokens, completion_tokens, created_at)
            SELECT r.id, s, 'tool_call', 'finished', 'tool_' || ((r.id + s) % 12), 'c' || s, '', '{}',
                   CASE WHEN (r.id + s) % 10 = 0 THEN '{"status": "error"}' ELSE '{"status": "done"}' END::jsonb,
                   (r.id + s) % 10 <> 0, '', '', 0, 0, r.created_at
            FROM assistant_agentrun r, generate_series(1, 3) s""")
        cursor.execute("ANALYZE")


def _median_ms(fn: Callable[[], object]) -> float:
    fn()
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _measure() -> None:
    from assistant.dashboard import DashboardQuery, dashboard_get, runs_in

    staff = get_user_model().objects.create_user(username="staff", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    today = timezone.localdate()
    print(f"{RUNS:,} runs, {RUNS * 3:,} steps over {DAYS} days")
    for days in (14, 90, 366):
        query = DashboardQuery(start=today - datetime.timedelta(days=days - 1), end=today)
        params = {"from": query.start.isoformat(), "to": query.end.isoformat()}
        baseline = _median_ms(partial(runs_in(query).count))
        figures = _median_ms(partial(dashboard_get, query))
        page = _median_ms(partial(client.get, "/admin/assistant/agentrun/dashboard/", params))
        print(f"{days:>3} days: figures {figures:6.1f} ms, whole page {page:6.1f} ms; "
              f"counting the range's runs {baseline:5.1f} ms (figures ×{figures / baseline:.1f})")
        if days == 14:
            verdict = "within" if page <= TARGET_PAGE_MS else "OVER"
            print(f"    14-day page {verdict} the {TARGET_PAGE_MS:.0f} ms target")


def main() -> None:
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = "bench_dashboard"
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        _fill()
        _measure()
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
