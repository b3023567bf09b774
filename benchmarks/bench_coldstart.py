"""Cold start: from exec to ready, for a web process and a worker, beside a bare Django project's start
measured in the same run; and what a fresh worker process's first turn pays against its second.

- `bare django`: `django-admin startproject`'s own project (SQLite, the contrib apps), its asgi module
  loaded: `django.setup()` and Django's ASGI handler. The baseline every ratio is taken to.
- `web`: what `daphne config.asgi:application` loads before it listens: daphne's server and the site's
  ASGI app (settings, `django.setup()`, the assistant's websocket routing).
- `worker`: what `celery -A config worker` loads before it connects: the Celery app, `django.setup()` and
  the system checks (Celery's Django fixup runs them), the tasks registered.
- `worker + warm-up`: the same, then the warm-up a worker now does when it starts (the configured model's
  SDK and the embedder's weights; see assistant/operations/warmup.py).
- `peer`: django-ai-assistant's `django.setup()`, when a peer virtualenv exists under `.data/peer-venv`
  (this benchmark does not install it).

Each variant runs COLDSTART_RUNS times (default 7), interleaved, each a new interpreter; the time is from
just before the exec to the child's "ready" (wall clock, one machine). Then the first-turn part: a fresh
process that calls `anthropic:` against a local instant stand-in server and embeds the question, as a
turn does, once cold and once after the warm-up; the ratio of its first call to its second.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
PEER_PYTHON = PROJECT_DIR / ".data" / "peer-venv" / "bin" / "python"

READY = "import json, sys, time; print(json.dumps({'ready': time.time(), 'modules': len(sys.modules)}))"

WEB = f"""
import daphne.cli  # what the daphne command imports before it loads the application
import config.asgi
{READY}
"""

# What `python -m celery` sets, so that the settings see a Celery process as they do under `celery worker`.
AS_CELERY = """
import os, sys
import celery
sys.argv[0] = os.path.join(os.path.dirname(celery.__file__), "__main__.py")
"""

WORKER = f"""
{AS_CELERY}
from config import celery_app as app
app.loader.import_default_modules()  # django.setup(), the system checks, the tasks' modules
app.finalize()
assert "assistant.run_turn" in app.tasks
{READY}
"""

WORKER_WARMED = f"""
{AS_CELERY}
from config import celery_app as app
app.loader.import_default_modules()
app.finalize()
assert "assistant.run_turn" in app.tasks
from assistant.operations.warmup import warm_up
warm_up(build_clients=True)
{READY}
"""

BARE = f"""
import baseline.asgi
{READY}
"""

PEER = f"""
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                    "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
                    "django_ai_assistant"],
    DATABASES={{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}}},
    SECRET_KEY="benchmark", USE_TZ=True,
)
django.setup()
{READY}
"""

# The first turn of a fresh process: the model call and the question's embedding, as the worker makes them.
FIRST_TURN = """
import json, os, sys, time
import django
django.setup()
from assistant.embeddings import get_embedder
from assistant.llm import Message, get_model
if sys.argv[1] == "warm":
    from assistant.operations.warmup import warm_up
    warm_up(build_clients=True)
timings = []
for text in ("hello", "hello again"):
    started = time.perf_counter()
    get_model().call_tools([Message.user(text)], [])
    get_embedder().embed([text])
    timings.append((time.perf_counter() - started) * 1000)
print(json.dumps(timings))
"""


def peer_cold_start(runs: int, *, python: Path = PEER_PYTHON) -> list[float] | None:
    """The peer's `django.setup()` times in seconds, or None when no peer virtualenv exists (or it cannot
    set up): another benchmark installs django-ai-assistant under .data/peer-venv."""
    if not python.exists():
        return None
    try:
        return [_time(str(python), PEER, cwd=Path(tempfile.gettempdir()))[0] for _ in range(runs)]
    except RuntimeError as exc:
        print(f"  (peer: {exc})")
        return None


def _time(python: str, code: str, *, cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Seconds from just before the exec to the child's "ready", and how many modules it had loaded."""
    started = time.time()
    done = subprocess.run([python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"exited with {done.returncode}: {done.stderr.strip()[-800:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["ready"] - started, int(report["modules"])


def _bare_project(folder: Path) -> None:
    subprocess.run([sys.executable, "-m", "django", "startproject", "baseline", str(folder)], check=True)


def _summary(values: list[float]) -> str:
    return (f"median {statistics.median(values) * 1000:6.0f} ms, spread {min(values) * 1000:.0f}–"
            f"{max(values) * 1000:.0f} ms")


def _first_turns(runs: int) -> None:
    from assistant.testing.providers import FakeAnthropicServer

    with FakeAnthropicServer() as server:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings"),
               "ASSISTANT_MODEL": "anthropic:fake-claude", "ANTHROPIC_BASE_URL": server.base_url,
               "ANTHROPIC_API_KEY": "benchmark"}
        results: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
        for _ in range(runs):
            for variant in results:
                done = subprocess.run([sys.executable, "-c", FIRST_TURN, variant], cwd=PROJECT_DIR, env=env,
                                      capture_output=True, text=True, check=True)
                first, second = json.loads(done.stdout.strip().splitlines()[-1])
                results[variant].append((first, second))
    print(f"\nfirst turn of a fresh process vs its second (anthropic: on an instant local server, "
          f"model call + the question's embedding; {runs} runs each, interleaved):")
    for variant, label in (("cold", "before the warm-up"), ("warm", "after the warm-up ")):
        firsts = [first for first, _ in results[variant]]
        seconds = [second for _, second in results[variant]]
        ratios = [first / second for first, second in results[variant]]
        print(f"  {label}: first p50 {statistics.median(firsts):7.1f} ms, second p50 "
              f"{statistics.median(seconds):5.1f} ms, first/second {statistics.median(ratios):6.1f}× "
              f"(spread {min(ratios):.1f}–{max(ratios):.1f}×)")


def main() -> None:
    runs = int(os.environ.get("COLDSTART_RUNS", "7"))
    print(f"size: {runs} runs of each variant, interleaved (COLDSTART_RUNS); a shared machine: read the ratios")
    with tempfile.TemporaryDirectory() as folder:
        bare_dir = Path(folder)
        _bare_project(bare_dir)
        bare_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "baseline.settings"}
        variants = {
            "bare django": (BARE, bare_dir, bare_env),
            "web": (WEB, PROJECT_DIR, None),
            "worker": (WORKER, PROJECT_DIR, None),
            "worker + warm-up": (WORKER_WARMED, PROJECT_DIR, None),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        modules: dict[str, int] = {}
        for _ in range(runs):
            for name, (code, cwd, env) in variants.items():
                seconds, count = _time(sys.executable, code, cwd=cwd, env=env)
                times[name].append(seconds)
                modules[name] = count
    bare = statistics.median(times["bare django"])
    print("exec → ready:")
    for name, values in times.items():
        print(f"  {name:<17} {_summary(values)}, {modules[name]:5d} modules, "
              f"{statistics.median(values) / bare:4.1f}× bare django")
    peer = peer_cold_start(runs)
    if peer is None:
        print("  peer              (no .data/peer-venv: django-ai-assistant not measured in this run)")
    else:
        print(f"  peer              {_summary(peer)}, {statistics.median(peer) / bare:4.1f}× bare django; "
              f"web / peer {statistics.median(times['web']) / statistics.median(peer):.2f}× (goal ≤ 0.5×)")
    _first_turns(max(1, min(runs, 3)))
