from __future__ import annotations

from django.apps import AppConfig


class TrackerConfig(AppConfig):
    name = "tracker"
    verbose_name = "Tracker"
    default_auto_field = "django.db.models.BigAutoField"
