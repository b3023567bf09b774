"""The site's settings plus the test-only app; used by pytest and by the Celery worker the tests start."""

from __future__ import annotations

import os

from django.conf import global_settings

# Under pytest-xdist each test process is a site of its own: its own test database (pytest-django names it
# after the process), and its own Redis database for Celery's queues, the results, the channel layer (whose
# prefix carries the number) and the assistant's keys, so one process's worker never takes another's runs.
# Process gwN takes the session's database plus 2N (1, 3, 5, 7 under `make test`), leaving 0 to `make run`
# and 2 to `make bench`. The worker and servers a test starts inherit the address, and the mark that it was
# moved already, from this process's environment.
_test_process = os.environ.get("PYTEST_XDIST_WORKER", "")
if _test_process.startswith("gw") and os.environ.get("REDIS_URL") and (
    os.environ.get("TEST_REDIS_MOVED_FOR") != _test_process
):
    from devstack.services import with_redis_db

    _session_database = int(os.environ["REDIS_URL"].rstrip("/").rpartition("/")[2] or 0)
    _process_database = _session_database + 2 * int(_test_process[2:])
    if _process_database > 15:  # a Redis server has 16 databases unless configured otherwise
        raise RuntimeError(f"Test process {_test_process} would need Redis database {_process_database}: "
                           "run fewer test processes (`make test TEST_PROCESSES=4`).")
    os.environ["REDIS_URL"] = with_redis_db(os.environ["REDIS_URL"], _process_database)
    os.environ["TEST_REDIS_MOVED_FOR"] = _test_process

from config.settings import *  # noqa: E402, F403
from config.settings import INSTALLED_APPS, MIDDLEWARE  # noqa: E402

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]
# A host's own gate after authentication, as a site with a second factor or a maintenance switch has one.
MIDDLEWARE = [*MIDDLEWARE, "tests.testapp.middleware.SessionGateMiddleware"]
ROOT_URLCONF = "tests.urls"
# Tests make many runs in a minute on purpose. The worker resolves a run's spec by name in these
# settings, so a spec a worker test runs under is declared here.
# A spec that asks members and relays their answers: every answer comes back to its model as data.
_RELAYS = {"handoff": "never", "routing": "never"}

ASSISTANT = {
    **ASSISTANT,  # noqa: F405
    "RUNS_PER_MINUTE": 10_000,
    # A test's server may be started with a limit of its own, low enough to reach quickly
    # (ASSISTANT_RUNS_PER_MINUTE=5 in its environment; tests/mcp/test_limits_concurrency.py).
    **{name: int(os.environ[f"ASSISTANT_{name}"])
       for name in ("RUNS_PER_MINUTE", "MCP_CALLS_PER_MINUTE", "MAX_IDENTICAL_TOOL_CALLS", "DICTATION_MAX_SECONDS")
       if os.environ.get(f"ASSISTANT_{name}")},
    # The suite's chats are the single assistant's, unless a test's server is started with ASSISTANT_SPEC.
    "SPEC": os.environ.get("ASSISTANT_SPEC") or "default",
    "SPECS": {
        **ASSISTANT["SPECS"],  # the site's demo society  # noqa: F405
        "test-reader": {"tools": "__all__", "permission_profile": "restricted", "role": "Reads the tracker."},
        # A small society the worker tests hand work round in: every model is the fake provider's. The specs that
        # ask members relay (`handoff` and `routing` "never": each answer comes back to the asking model, which
        # the tests script); `test-router` and `test-desk` hand over and route as a spec does by default.
        "test-viewer": {"tools": "__all__", "permission_profile": "restricted", "model": "openai:fake-gpt",
                        "role": "Reads the tracker."},
        "test-asker": {"tools": ["tracker_task_list"], "permission_profile": "standard", "model": "openai:fake-gpt",
                       "role": "Hands the person's requests to the members.",
                       "delegates": ["test-viewer", "test-clerk", "test-keeper"], **_RELAYS},
        "test-router": {"tools": [], "permission_profile": "standard", "model": "openai:fake-gpt",
                        "role": "Hands each request to the member for it.",
                        "delegates": ["test-viewer", "test-clerk", "test-desk"]},
        "test-desk": {"tools": ["tracker_project_create", "tracker_project_list"], "permission_profile": "standard",
                      "model": "openai:fake-gpt", "role": "Creates projects and asks the clerk for their tasks.",
                      "delegates": ["test-clerk"]},
        "test-clerk": {"tools": ["tracker_task_create", "tracker_task_list", "tracker_task_delete",
                                 "tracker_tasks_import"],
                       "permission_profile": "standard", "model": "openai:fake-gpt",
                       "role": "Adds, lists, imports (from a CSV file the person attached) and deletes tasks."},
        # A chain one member longer than MAX_DELEGATION_DEPTH (3) lets a tree go: a → b → c → d, and d → e.
        **{f"test-chain-{name}": {"tools": ["tracker_task_list"], "permission_profile": "standard",
                                  "model": "openai:fake-gpt", "role": f"Link {name} of a chain.",
                                  **({"delegates": [f"test-chain-{after}"], **_RELAYS} if after else {})}
           for name, after in zip("abcde", [*"bcde", ""], strict=True)},
        "test-keeper": {"tools": ["tracker_project_create", "tracker_project_list"], "permission_profile": "standard",
                        "model": "openai:fake-gpt", "role": "Creates projects and asks the clerk for their tasks.",
                        "delegates": ["test-clerk"], **_RELAYS},
    },
}

# The test database's commits return before their WAL reaches the disk: nothing a test checks depends on
# surviving a power cut, and every test's many small transactions stop waiting for an fsync each. Only the
# suite's sessions (and the workers and servers it starts on these settings) are changed, never the server.
DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c synchronous_commit=off"  # noqa: F405
# Tables emptied after a transactional test with DELETE rather than TRUNCATE (tests/postgresql/base.py).
DATABASES["default"]["ENGINE"] = "tests.postgresql"  # noqa: F405

# Every test makes its people with a password, and PBKDF2's many rounds (on purpose slow) cost a third of a
# second a person on a small machine: the suite's own hashes are MD5's, which no test's claim depends on.
# Django's own hashers stay behind it, so a hash made by a process on the site's settings still checks.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]
