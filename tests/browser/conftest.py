"""The browser tests: the panel, the pages around it, the admin and the dashboard, in Chromium. Where a model
answers, it is a scripted one (each test sets its turns with `model_script`) unless a module asks for the
site's own. The shared fixtures are in tests/browser/harness.py (a plugin of the suite's conftest); here
daphne is given the scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def site_model(scripted_model_path: Path) -> str:
    return f"scripted:{scripted_model_path}"
