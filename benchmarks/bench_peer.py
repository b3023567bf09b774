"""Beside the peer: the same three-tool turn, with an instantly answering model, through this project and
through django-ai-assistant, in one run, interleaved; each side's overhead is its turn median minus the
median of the same three tool calls made directly, exactly as the `turn` benchmark measures ours.

Optional: it installs the peer from PyPI into a throwaway virtualenv (`.data/peer-venv`, reused when it is
there), so `make bench` skips it unless `BENCH_PEER=1`; `python -m benchmarks peer` runs it. The goal:
ours ≤ 1.0× the peer's overhead on both of its paths in the same run (the peer answers inside the request;
ours keeps a durable queue, rows before events, live authority and memory recall, and is still to cost less).

The peer's side (`benchmarks/peer/`) is a small site of its own: django-ai-assistant set up as its
documentation does, an app whose three tools create a task, list tasks by a search and count a project's
tasks by status (what our turn asks of the tracker), and a LangChain chat model that asks for the three
calls and then answers "Done." with no wait. Its turn is measured two ways, alternating: through its HTTP
API as its own frontend makes a new chat, with the person's session (create the thread, post the message,
read the messages back), and through the functions those views call (`create_thread`, `create_message`),
which run the LangGraph agent and save the thread's messages. It runs on the same PostgreSQL server as ours
(a throwaway database of its own), the same Django, psycopg and connection settings. Ours runs through
`benchmarks.bench_turn`'s functions: `chat_send` to the `assistant.replied` event, through the broker, a
real worker and the channel layer.

`peer_cold_start_seconds()` gives the peer's cold start (exec → `django.setup()` done) for the cold-start
benchmark.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import NamedTuple

PROJECT_DIR = Path(__file__).resolve().parent.parent
PEER_DIR = Path(__file__).resolve().parent / "peer"
PEER_VENV = PROJECT_DIR / ".data" / "peer-venv"
PEER_PACKAGE = "django-ai-assistant==0.4.0"  # the newest release on PyPI when this was written
ENABLE_VARIABLE = "BENCH_PEER"
ROUNDS = int(os.environ.get("BENCH_PEER_ROUNDS", "6"))
RUNS_PER_ROUND = int(os.environ.get("BENCH_PEER_RUNS", "10"))
WARMUP = 5
GOAL_RATIO = 1.0
COLD_START_RUNS = 5


class Side(NamedTuple):
    turns: list[float]
    bare: list[float]

    @property
    def overhead(self) -> float:
        return statistics.median(self.turns) - statistics.median(self.bare)


class PeerColdStart(NamedTuple):
    seconds: float
    modules: int


def _peer_python() -> Path:
    return PEER_VENV / "bin" / "python"


def _peer_requirements() -> list[str]:
    """The peer, and the parts both sides share at the versions this project runs, so that what differs is
    the assistant, not Django or the database driver."""
    return [PEER_PACKAGE, f"Django=={version('django')}", f"psycopg[binary]=={version('psycopg')}",
            f"dj-database-url=={version('dj-database-url')}"]


def ensure_peer_venv() -> Path:
    """The peer's virtualenv's Python: made and installed from PyPI on first use (network needed), then reused
    while it holds the same requirements."""
    wanted = "\n".join(_peer_requirements()) + "\n"
    marker = PEER_VENV / "bench-requirements.txt"
    if _peer_python().exists() and marker.exists() and marker.read_text() == wanted:
        return _peer_python()
    print(f"Installing {PEER_PACKAGE} into {PEER_VENV} (needs PyPI) ...", flush=True)
    if not _peer_python().exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run([str(_peer_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *_peer_requirements()], check=True)
    marker.write_text(wanted)
    return _peer_python()


def _peer_env() -> dict[str, str]:
    """The peer's own settings, the server in DATABASE_URL (the one `devstack exec` gives ours)."""
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        from django.conf import settings

        database_url = settings.DATABASE_URL
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return {**env, "DJANGO_SETTINGS_MODULE": "peer_site.settings", "DATABASE_URL": database_url}


def peer_cold_start_samples(runs: int = COLD_START_RUNS) -> list[PeerColdStart]:
    """The peer's site from exec to `django.setup()` done (its assistants discovered, LangChain and LangGraph
    imported), one new process per sample, with the modules it loaded."""
    python, env = ensure_peer_venv(), _peer_env()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        process = subprocess.Popen([str(python), "run_peer.py", "ready"], cwd=PEER_DIR, env=env,
                                   stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        line = process.stdout.readline()
        elapsed = time.perf_counter() - started
        if process.wait(timeout=30) != 0 or not line.startswith("ready "):
            raise RuntimeError(f"the peer's site did not start: {line!r}")
        samples.append(PeerColdStart(seconds=elapsed, modules=int(line.split()[1])))
    return samples


def peer_cold_start_seconds(runs: int = COLD_START_RUNS) -> float:
    """The median of `runs` cold starts of the peer's site (exec → `django.setup()` done), in seconds."""
    return statistics.median(sample.seconds for sample in peer_cold_start_samples(runs))


class _Peer:
    """The peer's site in one long-lived process that runs blocks of turns on request."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([str(ensure_peer_venv()), "run_peer.py", "turns"], cwd=PEER_DIR,
                                        env=_peer_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.versions = ""

    def block(self, *, runs: int, warmup: int) -> tuple[Side, Side]:
        """`runs` turns through the peer's HTTP API and as many through its engine alone, with the bare calls
        after each pair: the API side, then the engine side."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"runs": runs, "warmup": warmup}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer's process ended (exit status {self.process.wait(timeout=30)})")
        answer = json.loads(line)
        self.versions = f"Django {answer['django']}, {answer['database']}"
        return Side(turns=answer["api"], bare=answer["bare"]), Side(turns=answer["engine"], bare=answer["bare"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # end of input: the peer drops its database and exits
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _describe(name: str, side: Side) -> None:
    from benchmarks import percentile

    print(f"  {name:<11} turn p50 {statistics.median(side.turns):6.1f} ms, p95 {percentile(side.turns, 0.95):6.1f} ms"
          f" | 3 bare calls p50 {statistics.median(side.bare):5.1f} ms, p95 {percentile(side.bare, 0.95):5.1f} ms"
          f" | overhead {side.overhead:6.1f} ms")


def compare(*, rounds: int = ROUNDS, runs: int = RUNS_PER_ROUND) -> tuple[dict[str, Side], dict[str, list[float]]]:
    """Ours and the peer's turns in `rounds` alternating blocks of `runs` (who goes first alternates too);
    returns each variant's samples, all rounds pooled (`ours`, `peer API`, `peer engine`), and each round's
    ratio ours / peer for each of the peer's paths."""
    from benchmarks.bench_turn import _time_turns, three_tool_turns

    pooled = {name: Side([], []) for name in ("ours", "peer API", "peer engine")}
    ratios: dict[str, list[float]] = {"peer API": [], "peer engine": []}
    peer = _Peer()
    # One event loop for all of our blocks, as a server keeps one: the channel layer's subscription then lasts
    # from block to block. A new loop a block would start a new subscriber, whose reader polls every 100 ms
    # until it is subscribed, and a block's first reply would wait on that poll.
    loop = asyncio.new_event_loop()
    try:
        with three_tool_turns("bench_peer_ours") as (user, calls, sent_from):
            print(f"{rounds} rounds × {runs} turns a variant (+{WARMUP} warm-up turns in the first); each round's "
                  "overheads and ratios ours / peer, then all rounds pooled:")
            for number in range(rounds):
                warmup = WARMUP if number == 0 else 0

                def run_ours(warmup: int = warmup) -> Side:
                    return Side(*loop.run_until_complete(_time_turns(user, calls, sent_from, runs=runs,
                                                                     warmup=warmup, print_phases=False)))

                if number % 2 == 0:
                    ours = run_ours()
                    api, engine = peer.block(runs=runs, warmup=warmup)
                else:
                    api, engine = peer.block(runs=runs, warmup=warmup)
                    ours = run_ours()
                for name, block in (("ours", ours), ("peer API", api), ("peer engine", engine)):
                    pooled[name].turns.extend(block.turns)
                    pooled[name].bare.extend(block.bare)
                ratios["peer API"].append(ours.overhead / api.overhead)
                ratios["peer engine"].append(ours.overhead / engine.overhead)
                print(f"  round {number + 1}: ours {ours.overhead:6.1f} ms | peer API {api.overhead:6.1f} ms "
                      f"(ratio {ours.overhead / api.overhead:4.2f}) | peer engine {engine.overhead:6.1f} ms "
                      f"(ratio {ours.overhead / engine.overhead:4.2f})")
    finally:
        peer.close()
        loop.close()
    print(f"peer: {PEER_PACKAGE}, {peer.versions}")
    return pooled, ratios


def _enabled() -> bool:
    named = any(argument.removeprefix("bench_") == "peer" for argument in sys.argv[1:])
    return named or os.environ.get(ENABLE_VARIABLE) == "1"


def main() -> None:
    if not _enabled():
        print(f"skipped: it installs {PEER_PACKAGE} from PyPI into .data/peer-venv. Run it with "
              f"`python -m benchmarks peer`, or set {ENABLE_VARIABLE}=1 to include it in `make bench`.")
        return
    ensure_peer_venv()
    sides, ratios = compare()
    for name, side in sides.items():
        _describe(name, side)
    ours = sides["ours"].overhead
    for name in ("peer API", "peer engine"):
        ratio = ours / sides[name].overhead
        verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
        print(f"overhead ratio ours / {name}: {ratio:.2f}, rounds {min(ratios[name]):.2f}–{max(ratios[name]):.2f} "
              f"(goal ≤ {GOAL_RATIO}: {verdict})")
    samples = peer_cold_start_samples()
    seconds = sorted(sample.seconds for sample in samples)
    print(f"peer cold start (exec → django.setup() done, {len(samples)} runs, for the cold-start benchmark): "
          f"p50 {statistics.median(seconds):.2f} s ({seconds[0]:.2f}–{seconds[-1]:.2f}), "
          f"{samples[0].modules} modules")
