from __future__ import annotations

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    """Tools that only the test suite installs: a side effect that can be counted, and a slow call."""

    name = "tests.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"
