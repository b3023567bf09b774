"""`offline`: the built-in demo model. Deterministic, no network, labelled `offline-demo`.

It works from the tools' names, descriptions and JSON Schemas only (see `model.py`), so a
developer's own tools work with it as well as the example app's.
"""

from __future__ import annotations

from .model import MODEL_NAME, OfflineModel

__all__ = ["MODEL_NAME", "OfflineModel"]
