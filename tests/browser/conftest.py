"""The browser tests of the panel: a scripted model answers (each test sets its turns with `model_script`),
through daphne, the real worker and the channel layer. The shared fixtures are in tests/browser/harness.py
(a plugin of the suite's conftest); here daphne is given the scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def site_model(scripted_model_path: Path) -> str:
    return f"scripted:{scripted_model_path}"
