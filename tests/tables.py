"""Every row of a set of tables, as plain values: how a test shows that something changed nothing. A count
would not do: an update, or a delete followed by an insert, keeps it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.apps import apps
from django.db.models import Model, Q


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value  # pgvector hands back numpy arrays


def models_of(*app_labels: str) -> list[type[Model]]:
    """The models of these apps, their many-to-many tables included."""
    return [model for model in apps.get_models(include_auto_created=True) if model._meta.app_label in app_labels]


def every_model_but(*app_labels: str) -> list[type[Model]]:
    """Every installed model, many-to-many tables included, but those of these apps."""
    return [model for model in apps.get_models(include_auto_created=True)
            if model._meta.app_label not in app_labels]


def table_rows(models: Iterable[type[Model]], *, leaving_out: Mapping[type[Model], Q] | None = None
               ) -> dict[str, list[dict[str, Any]]]:
    """Every row of each model's table, in primary-key order, each column's value as stored; `leaving_out`
    names rows of a model that are allowed to change (say, the runs a test itself starts)."""
    leaving_out = leaving_out or {}
    snapshot = {}
    for model in models:
        rows = model._default_manager.order_by("pk")
        if model in leaving_out:
            rows = rows.exclude(leaving_out[model])
        snapshot[model._meta.label] = [{key: _plain(value) for key, value in row.items()} for row in rows.values()]
    return snapshot
