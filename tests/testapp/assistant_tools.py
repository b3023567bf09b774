from __future__ import annotations

from tests.testapp import views  # noqa: F401  (importing the views registers their @tool declarations)
