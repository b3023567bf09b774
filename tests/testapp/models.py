from __future__ import annotations

from django.conf import settings
from django.db import models


class Effect(models.Model):
    """One row per time a tool really took effect: how tests prove nothing was done twice."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    label = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.label
