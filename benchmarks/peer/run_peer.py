"""The peer's side of the benchmark, run with the peer's virtualenv's Python from this directory.

`run_peer.py turns`: creates a throwaway database (`bench_peer` on the server in DATABASE_URL), a person and
a project, then reads one JSON command a line on stdin — `{"runs": N, "warmup": W}` — and answers each with
one JSON line of N samples of each, alternating (the model answers instantly):
- `api`: a new chat the way the peer's own frontend makes one, through its HTTP API with the person's
  session (Django's test client, in process: no network): create the thread, post the message (which runs
  the agent and answers 201 with no body), read the thread's messages to get the reply;
- `engine`: the same turn below the API, through the functions its views call (`create_thread`,
  `create_message`): no request, no session, no reading back;
- `bare`: the same three tool calls made directly, as the project's turn benchmark alternates them.
An empty line or end of input drops the database.

`run_peer.py ready`: `django.setup()` and one line, `ready <modules loaded>` — the cold start's end.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "peer_site.settings")


def _ready() -> int:
    import django

    django.setup()
    print(f"ready {len(sys.modules)}", flush=True)
    return 0


def _turns() -> int:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django_ai_assistant.helpers.use_cases import create_message, create_thread
    from django_ai_assistant.models import Thread
    from peer_demo.ai_assistants import TrackerAssistant
    from peer_demo.models import Project

    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        user = get_user_model().objects.create_user("bench", password="x")  # noqa: S106
        home = Project.objects.create(owner=user, name="Home")
        calls = [
            {"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "Benchmark task"}},
            {"name": "tracker_task_list", "arguments": {"search": "Benchmark"}},
            {"name": "tracker_project_stats", "arguments": {"pk": home.pk}},
        ]
        TrackerAssistant.scripted_calls = calls
        # The tools' own bodies, called directly: the same work without the assistant around it.
        direct = TrackerAssistant(user=user)

        browser = Client()
        browser.force_login(user)

        def check(thread: Thread) -> None:
            # Every step was recorded: the question, the tool calls, three results, the answer.
            if thread.messages.count() != 6:
                raise RuntimeError(f"the peer's thread holds {thread.messages.count()} messages, not 6")

        def engine_turn() -> float:
            started = time.perf_counter()
            thread = create_thread(name="benchmark turn", assistant_id=TrackerAssistant.id, user=user)
            answer = create_message(TrackerAssistant.id, thread, user, "benchmark turn")
            elapsed = (time.perf_counter() - started) * 1000
            if answer["output"] != "Done.":
                raise RuntimeError(f"the peer's turn ended with {answer['output']!r}")
            check(thread)
            return elapsed

        def api_turn() -> float:
            started = time.perf_counter()
            created = browser.post("/ai-assistant/threads/", {"name": "benchmark turn",
                                   "assistant_id": TrackerAssistant.id}, content_type="application/json")
            thread_id = created.json()["id"]
            sent = browser.post(f"/ai-assistant/threads/{thread_id}/messages/", {
                "assistant_id": TrackerAssistant.id, "content": "benchmark turn"}, content_type="application/json")
            listed = browser.get(f"/ai-assistant/threads/{thread_id}/messages/")
            elapsed = (time.perf_counter() - started) * 1000
            if (created.status_code, sent.status_code, listed.status_code) != (200, 201, 200):
                raise RuntimeError(f"the peer's API answered {created.status_code}, {sent.status_code}, "
                                   f"{listed.status_code}")
            if listed.json()[-1]["content"] != "Done.":
                raise RuntimeError(f"the peer's API turn ended with {listed.json()[-1]!r}")
            check(Thread.objects.get(pk=thread_id))
            return elapsed

        def bare() -> float:
            started = time.perf_counter()
            for call in calls:
                getattr(direct, call["name"])(**call["arguments"])
            return (time.perf_counter() - started) * 1000

        for line in sys.stdin:
            if not line.strip():
                break
            command: dict[str, Any] = json.loads(line)
            samples: dict[str, list[float]] = {"api": [], "engine": [], "bare": []}
            for number in range(command["warmup"] + command["runs"]):
                taken = {"api": api_turn(), "engine": engine_turn(), "bare": bare()}
                if number >= command["warmup"]:
                    for name, value in taken.items():
                        samples[name].append(value)
            print(json.dumps({**samples, "django": django.get_version(),
                              "database": settings.DATABASES["default"]["ENGINE"]}), flush=True)
    finally:
        # LangGraph runs the tools in a thread pool made for each turn, and Django gives each thread its own
        # connection, which nothing closes: end those left before the database can be dropped.
        gc.collect()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)
    return 0


if __name__ == "__main__":
    modes = {"turns": _turns, "ready": _ready}
    if len(sys.argv) != 2 or sys.argv[1] not in modes:
        sys.exit(f"usage: run_peer.py {{{'|'.join(modes)}}}")
    sys.exit(modes[sys.argv[1]]())
