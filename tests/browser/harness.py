"""What every browser test shares: headless Chromium (one per test module), daphne serving the site on the
test database beside the real worker, signing in, asking, and the axe-core accessibility check. Every test
that drives Chromium starts it here (`page`, or `chromium` for a page of its own), so there is one launcher.

It is a plugin of the suite (tests/conftest.py lists it in `pytest_plugins`), so its fixtures — `page`,
`site_url`, `model_script` — are there for any test module. `site_model` picks the model daphne's runs use:
by default the site's own (the offline demo model); tests/browser/'s conftest gives its modules a scripted
model whose script a test rewrites before each turn (`model_script`), and a module there that needs the
site's own model says so (its `site_model` returns None).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.conftest import PROJECT_DIR, WorkerProcess, daphne_on_test_database, the_only_worker

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
AXE_SCRIPT = PROJECT_DIR / "tests" / "assets" / "axe.min.js"
SCREENSHOTS = PROJECT_DIR / ".data" / "screenshots"
#: What the accessibility check holds the panel to: the WCAG 2 A and AA rules.
AXE_TAGS = ("wcag2a", "wcag2aa")

#: The marks of a browser test module: `pytestmark = [*BROWSER_MARKS, ...]`.
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # A developer's machine may lack Chromium; CI installs it, so there a missing browser is a failure.
    pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="Debian's chromium is not installed"),
]


@pytest.fixture(scope="module")
def site_model() -> str | None:
    """The ASSISTANT_MODEL daphne runs with; None keeps the site's default (the offline demo model)."""
    return None


@pytest.fixture(scope="module")
def site_url(session_worker: WorkerProcess, django_db_blocker: Any, site_model: str | None) -> Iterator[str]:
    """daphne serving the site (HTTP and websockets) on the test database, once per module, with the suite's
    worker answering (a fault test earlier in this test process may have stopped it)."""
    the_only_worker(session_worker)
    env = {"ASSISTANT_MODEL": site_model} if site_model else None
    with daphne_on_test_database(django_db_blocker, env=env) as port:
        yield f"http://127.0.0.1:{port}"


class _Chromium:
    """The test thread's headless Chromium, started by the first test that needs a page and kept for the
    next ones. Playwright's sync API runs an event loop in this thread for as long as it lives, and
    `asyncio.run` or `async_to_sync` refuse to run beside it; so it is stopped at the end of a module and
    before any test that has no page (pytest-django runs a module's tests without a database after the
    others, whatever their order in the file)."""

    def __init__(self) -> None:
        self._playwright: Any = None
        self._patch: pytest.MonkeyPatch | None = None
        self.browser: Any = None
        #: Flags of the running module's own (`chromium_args`), added to every launch while it runs.
        self.extra_args: tuple[str, ...] = ()
        self._launched_with: tuple[str, ...] = ()

    def start(self) -> Any:
        if self.browser is not None and self._launched_with != self.extra_args:
            self.stop()  # launched for another module's flags
        if self.browser is None:
            from playwright.sync_api import sync_playwright

            assert CHROMIUM, "Chromium is needed for the browser tests: apt-get install chromium"
            # The tests' own ORM calls are plain synchronous code, which Django would refuse beside the loop.
            self._patch = pytest.MonkeyPatch()
            self._patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
            # Starting Playwright gives this thread another context, and Django keeps database connections per
            # context: one open now would be out of reach from then on, and out of the pool for good.
            _close_database_connections()
            self._playwright = sync_playwright().start()
            self.browser = self._playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync", "--no-first-run", *self.extra_args],
            )
            self._launched_with = self.extra_args
        return self.browser

    def stop(self) -> None:
        if self.browser is not None:
            try:
                self.browser.close()
            finally:
                _close_database_connections()  # those opened in Playwright's context, which ends here
                self._playwright.stop()
                if self._patch is not None:
                    self._patch.undo()
                self.browser = self._playwright = self._patch = None


_CHROMIUM = _Chromium()


def _close_database_connections() -> None:
    """Hand this context's database connections back to the pool, but one a test's transaction is using."""
    for wrapper in connections.all(initialized_only=True):
        if not wrapper.in_atomic_block:
            wrapper.close()


@pytest.fixture(scope="module")
def chromium_args() -> tuple[str, ...]:
    """Flags a module adds to Chromium's command line (a fake microphone, say): its browser is launched with
    them and stopped after it, so no other module's browser has them."""
    return ()


@pytest.fixture(scope="module")
def chromium(chromium_args: tuple[str, ...]) -> Iterator[_Chromium]:
    """One headless Chromium for the module's browser tests; each test gets its own context in it."""
    _CHROMIUM.extra_args = tuple(chromium_args)
    yield _CHROMIUM
    _CHROMIUM.stop()
    _CHROMIUM.extra_args = ()


@pytest.fixture(autouse=True)
def _no_browser_loop_beside_other_tests(request: pytest.FixtureRequest) -> None:
    if "page" not in request.fixturenames:
        _CHROMIUM.stop()


@pytest.fixture
def page(chromium: _Chromium, site_url: str) -> Iterator[Any]:
    """A fresh tab in a fresh context (no cookies, no localStorage) at desktop size."""
    # bypass_csp: the tests judge the markup the panel builds, not a policy that might hide a mistake.
    context = chromium.start().new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    yield tab
    context.close()


def write_model_script(path: Path, entries: Sequence[dict[str, Any]]) -> None:
    """Replace the scripted model's script at once: daphne and the worker read it while a test runs."""
    staging = path.with_suffix(".tmp")
    staging.write_text(json.dumps(list(entries)))
    staging.replace(path)


@pytest.fixture(scope="module")
def scripted_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("browser-model") / "script.json"
    write_model_script(path, [{"text": "No script was set for this turn."}])
    return path


@pytest.fixture
def model_script(scripted_model_path: Path) -> Callable[..., None]:
    """`model_script({"tool_calls": [...]}, {"text": "..."})`: what the model answers in the next turn.
    Every run replays the script from its start (a run resumed after an approval skips what it used), so
    set it before each message and leave it until that run has finished."""

    def write(*entries: dict[str, Any]) -> None:
        write_model_script(scripted_model_path, entries)

    return write


def log_in(page: Any, site_url: str, username: str) -> None:
    page.goto(site_url + "/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(site_url + "/")


FINAL_REPLIES = ".assistant-message.is-assistant:not(.is-draft)"


def ask(page: Any, text: str, *, within: str = "") -> None:
    """Type `text` into the (first) conversation `within` a selector, press Enter, and wait for one more
    final reply there."""
    scope = (within + " ") if within else ""
    answered = page.locator(scope + FINAL_REPLIES).count()
    page.fill(scope + "[data-assistant-input]", text)
    page.press(scope + "[data-assistant-input]", "Enter")
    wait_for_replies(page, answered + 1, within=within)


def wait_for_replies(page: Any, count: int, *, within: str = "") -> None:
    selector = json.dumps((within + " " if within else "") + FINAL_REPLIES)
    try:
        page.wait_for_function(f"document.querySelectorAll({selector}).length >= {count}")
    except PlaywrightTimeoutError as timeout:
        raise AssertionError(f"{timeout.message}\nThe panel showed {page.locator(selector[1:-1]).count()} of "
                             f"{count} replies; the newest runs in the test database:\n{_newest_runs()}") from None


def _newest_runs() -> str:
    """Where a reply that never came got to, for the failure's message: a run the worker never took, one it
    ended, or one it ended whose events the page never heard of."""
    from django.utils import timezone

    from assistant.models import AgentRun

    now = timezone.now()
    return "\n".join(
        f"  run {run.pk} {run.status} {run.stop_reason or ''} created {(now - run.created_at).total_seconds():.1f}s"
        f" ago, started {_ago(now, run.started_at)}, finished {_ago(now, run.finished_at)}"
        for run in AgentRun.objects.order_by("-pk")[:5]) or "  none"


def _ago(now: Any, moment: Any) -> str:
    return f"{(now - moment).total_seconds():.1f}s ago" if moment else "never"


def axe_violations(
    page: Any, context_selector: str, impacts: Sequence[str] = ("serious", "critical")
) -> list[dict[str, Any]]:
    """axe-core's WCAG 2 A/AA violations of `impacts` inside `context_selector` (which must exist), each
    `{id, impact, help, nodes: [{target, html, failure}]}`."""
    page.wait_for_selector(context_selector, state="attached")
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE_SCRIPT))
    violations: list[dict[str, Any]] = page.evaluate(
        """async ([selector, tags]) => {
            const results = await axe.run({include: [selector]}, {
                runOnly: {type: "tag", values: tags}, resultTypes: ["violations"],
            });
            return results.violations.map((violation) => ({
                id: violation.id, impact: violation.impact, help: violation.help,
                nodes: violation.nodes.map((node) => ({
                    target: node.target.join(" "), html: node.html.slice(0, 200), failure: node.failureSummary,
                })),
            }));
        }""",
        [context_selector, list(AXE_TAGS)],
    )
    return [violation for violation in violations if violation["impact"] in impacts]


def describe_violations(violations: Sequence[dict[str, Any]]) -> str:
    """A failure message a person can act on: each rule, its impact, and the first offending elements."""
    lines = []
    for violation in violations:
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']}")
        for node in violation["nodes"][:5]:
            lines.append(f"    {node['target']}: {node['html']}")
            lines.append("      " + (node["failure"] or "").replace("\n", "\n      "))
    return "\n".join(lines)


def screenshot(target: Any, name: str, **options: Any) -> Path:
    """Save a screenshot of a page or a locator under .data/screenshots/ (for the closing note; never compared)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    target.screenshot(path=str(path), **options)
    return path
