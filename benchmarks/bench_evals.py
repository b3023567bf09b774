"""What an eval costs against running live: the tracker's demo requests answered by the offline demo model,
(a) replayed as an eval set's cases — every tool call answered from the case's recording, nothing run, the
result graded — and (b) sent again as ordinary runs, the tools running for real through the tracker's views,
the answer remembered and filed in the person's profile. Both through the same real worker (the site's
settings: the orchestrator hands each request to a member, so a case is a tree, and replays as one).

First each request is sent live a few times and each of those runs becomes a case of one set. Then, for a
number of rounds in one sitting, a block of each kind handles the same requests (the order turning each
round): the replay block is one eval run of the set (from `eval_run_start` until its last result is graded),
the live block the same questions sent at once (from the first `chat_send` until the last run ended).
Reported: cases per second per block (median and the rounds' spread), each case's time from queued to
ended (median and p95), CPU per case (the worker's processes over the block, and this process's while it
starts the block's work; PostgreSQL's is not counted, its server being shared), and the ratios replay/live. The
benchmark fails if a replayed case does not pass, a replay changed the site's data, or a live run failed.
Goal: replay costs less than live (more cases per second, less CPU per case).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.test import override_settings

from benchmarks import percentile

#: The demo requests of the tracker the offline model carries end to end (README, "Try it").
QUESTIONS = ("list my projects", "what are my open tasks?", "add a task 'Buy milk' to Home",
             "show me the tasks in Home")
ROUNDS = 6
#: How many times each question is recorded (and so how many cases it makes, and a block handles).
COPIES = 2
KINDS = ("replay", "live")
#: How often the end of a block is looked for: fine beside a block's seconds, and rare enough that this
#: process's polling stays out of the way (its CPU is counted only while it starts a block's work).
POLL_SECONDS = 0.02


@dataclass
class Result:
    cases: int = 0
    #: Per kind, each block's seconds, and each case's time from queued to ended in ms (every block's).
    blocks: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    case_ms: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    #: Per kind, each block's CPU seconds: the worker's processes (all the block took), and this one's while it
    #: started the block's work (the chats, messages and runs of a send, or the eval run and its replays).
    worker_cpu: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    start_cpu: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})

    def cpu_ms_per_case(self, kind: str) -> list[float]:
        return [(worker + start) * 1000 / self.cases
                for worker, start in zip(self.worker_cpu[kind], self.start_cpu[kind], strict=True)]
    #: The members' runs under the last eval run's replays (each a replay too), and under its recordings.
    replay_members: int = 0
    recorded_members: int = 0
    #: Replayed cases that did not pass (the benchmark fails on any).
    failed: list[str] = field(default_factory=list)

    def per_second(self, kind: str) -> list[float]:
        return [self.cases / seconds for seconds in self.blocks[kind]]

    def ratios(self) -> list[float]:
        """Each round's replay cases/s over live cases/s."""
        return [live / replay for replay, live in zip(self.blocks["replay"], self.blocks["live"], strict=True)]


def _cpu_seconds(root_pid: int) -> float:
    """User + system CPU of the process `root_pid` and its descendants (and what they reaped)."""
    from benchmarks.load import _children_by_parent, _read_stat, _tree

    stats = [stat for pid in _tree(root_pid, _children_by_parent()) if (stat := _read_stat(pid)) is not None]
    return sum(stat.own_seconds + stat.reaped_seconds for stat in stats)


def _own_cpu_seconds() -> float:
    return time.process_time()


def _wait(done: Callable[[], bool], what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(POLL_SECONDS)


def _case_ms(runs: list[Any]) -> list[float]:
    return [(run.finished_at - run.created_at).total_seconds() * 1000 for run in runs]


def _live_block(user: Any, sent_from: Any, questions: list[str]) -> tuple[list[float], float]:
    """The questions sent at once as ordinary runs, each in a chat of its own: their times once all ended, and
    this process's CPU seconds sending them."""
    from assistant.conversation.services import chat_send
    from assistant.models import AgentRun

    cpu = _own_cpu_seconds()
    ids = [chat_send(user=user, content=question, new_chat=True, sent_from=sent_from).run.pk for question in questions]
    cpu = _own_cpu_seconds() - cpu
    runs = AgentRun.objects.filter(pk__in=ids)
    _wait(lambda: not runs.filter(status__in=AgentRun.ACTIVE_STATUSES).exists(), "the live block to end")
    ended = list(runs)
    failed = [f"{run.pk}: {run.status} {run.error}" for run in ended if run.status != "succeeded"]
    if failed:
        raise RuntimeError(f"Live runs failed: {failed}")
    return _case_ms(ended), cpu


def _replay_block(eval_set: Any, result: Result) -> tuple[list[float], float]:
    """One eval run of the set with the offline model: its replays' times once every result is graded, and
    this process's CPU seconds starting it."""
    from assistant.evals.models import EvalRun
    from assistant.evals.replays import Candidate, eval_run_refresh, eval_run_start
    from assistant.models import AgentRun

    cpu = _own_cpu_seconds()
    eval_run = eval_run_start(eval_set, [Candidate("offline", model="offline")])
    cpu = _own_cpu_seconds() - cpu
    # The worker grades each replay as it ends and closes the eval run with the last one.
    _wait(lambda: EvalRun.objects.filter(pk=eval_run.pk, status=EvalRun.Status.FINISHED).exists(),
          "the eval run to finish")
    eval_run_refresh(eval_run)
    results = list(eval_run.results.all())
    result.failed += [f"case {r.case_id}: {r.status} {r.grades or r.error}" for r in results if not r.passed]
    replays = [r.replay_run_id for r in results]
    result.replay_members = AgentRun.objects.filter(root_id__in=replays).count()
    return _case_ms(list(AgentRun.objects.filter(pk__in=replays))), cpu


def _site_rows() -> dict[str, int]:
    """The rows of the site's own tables (the tracker's, the people's): what a replay must leave as it was."""
    from django.apps import apps

    return {model._meta.label: model._default_manager.count() for model in apps.get_models()
            if model._meta.app_label in ("tracker", "auth")}


def measure(*, rounds: int = ROUNDS, copies: int = COPIES, database_name: str = "bench_evals") -> Result:
    from assistant.evals.cases import case_add, set_named
    from assistant.models import AgentRun
    from benchmarks.bench_turn import signed_in_person
    from benchmarks.load import LOG_DIR, celery_worker, clear_leftovers, throwaway_database
    from tracker.models import Project, Task

    clear_leftovers()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    result = Result()
    with throwaway_database(database_name) as database_url, \
            override_settings(ASSISTANT={**settings.ASSISTANT, "MODEL": "offline", "RUNS_PER_MINUTE": 100_000}), \
            celery_worker({**os.environ, "DATABASE_URL": database_url, "ASSISTANT_MODEL": "offline"},
                          log=LOG_DIR / f"{database_name}-worker.log") as worker:
        user, sent_from = signed_in_person("bench-evals")
        home = Project.objects.create(owner=user, name="Home")
        Project.objects.create(owner=user, name="Work")
        Task.objects.create(project=home, title="Water plants")
        questions = [question for question in QUESTIONS for _ in range(copies)]
        # The recordings: each question sent live, one after another, each run a case.
        eval_set = set_named("bench", create=True)
        for question in questions:
            _live_block(user, sent_from, [question])
            run = AgentRun.objects.filter(owner=user, parent=None).latest("pk")
            case_add(eval_set, run)
        result.cases = len(questions)
        result.recorded_members = AgentRun.objects.filter(root__in=[case.source_run for case in eval_set.cases.all()]
                                                          ).count()
        blocks: dict[str, Callable[[], tuple[list[float], float]]] = {
            "replay": lambda: _replay_block(eval_set, result),
            "live": lambda: _live_block(user, sent_from, questions),
        }
        blocks["replay"]()  # a warm-up of each: the first eval run and live block load what the rest reuse
        blocks["live"]()
        for number in range(rounds):
            for kind in KINDS[number % 2:] + KINDS[:number % 2]:  # the order turns each round
                rows = _site_rows()
                cpu, started = _cpu_seconds(worker.pid), time.perf_counter()
                times, start_cpu = blocks[kind]()
                result.blocks[kind].append(time.perf_counter() - started)
                result.worker_cpu[kind].append(_cpu_seconds(worker.pid) - cpu)
                result.start_cpu[kind].append(start_cpu)
                result.case_ms[kind] += times
                if kind == "replay" and _site_rows() != rows:
                    raise RuntimeError(f"A replay changed the site's data: {rows} → {_site_rows()}")
            print(f"  round {number + 1}: " + ", ".join(
                f"{kind} {result.cases / result.blocks[kind][-1]:6.1f} cases/s" for kind in KINDS), flush=True)
    if result.failed:
        raise RuntimeError(f"Replayed cases that did not pass: {result.failed}")
    return result


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} (rounds {min(values):.1f}–{max(values):.1f})"


def main() -> None:
    from benchmarks.load import env_size

    rounds = env_size("BENCH_EVALS_ROUNDS", ROUNDS)
    copies = env_size("BENCH_EVALS_COPIES", COPIES)
    print(f"size: {rounds} rounds (BENCH_EVALS_ROUNDS), {len(QUESTIONS)} demo requests × {copies} cases each "
          f"(BENCH_EVALS_COPIES), offline model, one worker of concurrency 2; blocks interleaved")
    result = measure(rounds=rounds, copies=copies)
    named = {"replay": "(a) replayed from the recordings, graded", "live": "(b) run live, tools for real"}
    for kind, what in named.items():
        per_case = result.cpu_ms_per_case(kind)
        print(f"{what}: {_spread(result.per_second(kind))} cases/s; a case queued→ended p50 "
              f"{statistics.median(result.case_ms[kind]):.0f} ms, p95 {percentile(result.case_ms[kind], 0.95):.0f} ms; "
              f"CPU {_spread(per_case)} ms a case (the worker, and this process starting it)")
    print(f"members asked: {result.recorded_members} in the {result.cases} recordings, "
          f"{result.replay_members} in each eval run's replays (replayed from the recordings too)")
    ratios = result.ratios()
    replay_cpu, live_cpu = (statistics.median(result.cpu_ms_per_case(kind)) for kind in KINDS)
    print(f"replay/live throughput {statistics.median(ratios):.2f}× (rounds {min(ratios):.2f}–{max(ratios):.2f}×); "
          f"CPU a case replay/live {replay_cpu / live_cpu:.2f}×: replay "
          + ("costs less than live" if statistics.median(ratios) > 1 and replay_cpu < live_cpu else
             "does NOT cost less than live"))
