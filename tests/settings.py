"""The site's settings plus the test-only app; used by pytest and by the Celery worker the tests start."""

from __future__ import annotations

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
    "SPECS": {"test-reader": {"tools": "__all__", "permission_profile": "restricted"}},
}
