"""Settings of the peer's site: django-ai-assistant as its documentation sets it up, with one small app whose
three tools read and write the same kind of rows as the project's tracker, on the database in DATABASE_URL."""

from __future__ import annotations

import os

import dj_database_url

SECRET_KEY = "peer-benchmark-only"  # noqa: S105 - a throwaway site that serves nothing
DEBUG = False
ALLOWED_HOSTS = ["testserver"]  # Django's test client, which the benchmark drives the API with
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django_ai_assistant",
    "peer_demo",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "peer_site.urls"

# The same server and connection settings as the project's own site (config/settings.py).
DATABASES = {
    "default": dj_database_url.parse(
        os.environ["DATABASE_URL"],
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("PEER_TEST_DATABASE_NAME", "bench_peer")}
