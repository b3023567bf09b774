"""The browser tests: the panel, the pages around it, the admin and the dashboard, in Chromium. Where a model
answers, it is a scripted one (each test sets its turns with `model_script`) unless a module asks for the
site's own. The shared fixtures are in tests/browser/harness.py (a plugin of the suite's conftest); here
daphne is given the scripted model."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from tests.conftest import daphne_log_path, log_tail


@pytest.fixture(scope="module")
def site_model(scripted_model_path: Path) -> str:
    return f"scripted:{scripted_model_path}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed browser test's report shows the page it was on (its address and text), in CI's log where no
    screenshot is kept: "the element never came" says little of whether the page was an error, a login or
    the right page a step behind."""
    report = yield
    page = getattr(item, "funcargs", {}).get("page")
    if report.failed and call.when == "call" and page is not None and not page.is_closed():
        try:
            text = page.inner_text("body", timeout=2_000)
        except Exception as error:  # the report still goes out, saying why the page could not be read
            text = f"(the page could not be read: {error})"
        report.sections.append(("the page at the failure", f"{page.url}\n{text[:3000]}"))
        log = daphne_log_path()
        if log.exists():
            report.sections.append((f"the end of daphne's log ({log.name})", log_tail(log)))
    return report
