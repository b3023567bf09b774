"""The site's settings plus the test-only app; used by pytest and by the Celery worker the tests start."""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS, MIDDLEWARE

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]
# A host's own gate after authentication, as a site with a second factor or a maintenance switch has one.
MIDDLEWARE = [*MIDDLEWARE, "tests.testapp.middleware.SessionGateMiddleware"]
ROOT_URLCONF = "tests.urls"
# Tests make many runs in a minute on purpose. The worker resolves a run's spec by name in these
# settings, so a spec a worker test runs under is declared here.
ASSISTANT = {
    **ASSISTANT,  # noqa: F405
    "RUNS_PER_MINUTE": 10_000,
    # A test's server may be started with a limit of its own, low enough to reach quickly
    # (ASSISTANT_RUNS_PER_MINUTE=5 in its environment; tests/test_limits_concurrency.py).
    **{name: int(os.environ[f"ASSISTANT_{name}"])
       for name in ("RUNS_PER_MINUTE", "MCP_CALLS_PER_MINUTE", "MAX_IDENTICAL_TOOL_CALLS")
       if os.environ.get(f"ASSISTANT_{name}")},
    # The suite's chats are the single assistant's, unless a test's server is started with ASSISTANT_SPEC.
    "SPEC": os.environ.get("ASSISTANT_SPEC") or "default",
    "SPECS": {
        **ASSISTANT["SPECS"],  # the site's demo society  # noqa: F405
        "test-reader": {"tools": "__all__", "permission_profile": "restricted", "role": "Reads the tracker."},
        # A small society the worker tests hand work round in: every model is the fake provider's.
        "test-viewer": {"tools": "__all__", "permission_profile": "restricted", "model": "openai:fake-gpt",
                        "role": "Reads the tracker."},
        "test-asker": {"tools": ["tracker_task_list"], "permission_profile": "standard", "model": "openai:fake-gpt",
                       "role": "Hands the person's requests to the members.",
                       "delegates": ["test-viewer", "test-clerk", "test-keeper"]},
        "test-clerk": {"tools": ["tracker_task_create", "tracker_task_list", "tracker_task_delete"],
                       "permission_profile": "standard", "model": "openai:fake-gpt",
                       "role": "Adds, lists and deletes tasks."},
        # A chain one member longer than MAX_DELEGATION_DEPTH (3) lets a tree go: a → b → c → d, and d → e.
        **{f"test-chain-{name}": {"tools": ["tracker_task_list"], "permission_profile": "standard",
                                  "model": "openai:fake-gpt", "role": f"Link {name} of a chain.",
                                  **({"delegates": [f"test-chain-{after}"]} if after else {})}
           for name, after in zip("abcde", [*"bcde", ""], strict=True)},
        "test-keeper": {"tools": ["tracker_project_create", "tracker_project_list"], "permission_profile": "standard",
                        "model": "openai:fake-gpt", "role": "Creates projects and asks the clerk for their tasks.",
                        "delegates": ["test-clerk"]},
    },
}
