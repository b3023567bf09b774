"""The Celery app. Its settings are the CELERY_* names in config/settings.py."""

from __future__ import annotations

import os

from celery import Celery

from config.tracing import instrument_site

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
instrument_site()

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
