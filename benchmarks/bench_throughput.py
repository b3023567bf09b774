"""Throughput: 1,000 turns from 100 people queued at once, on `make run`'s layout (one Celery worker with a
pool of two, one daphne), with the instant offline model.

Each person has two tabs open on the assistant's socket; one of them sends all of the person's messages
(`assistant.send`, each in a new chat), every message of every person at once. Every message must be
answered exactly once — counted in the database (runs by status, reply messages) and on the sockets (each
`assistant.replied` seen once by BOTH tabs, and every finished step too) — or the benchmark fails.

Figures: turns/s from the first send to the last reply, against the goal of 25 turns/s on 2 cores (the
CPU figures use the cores this process may run on, however many the machine has); time
to reply (send → `assistant.replied` on the sending tab); CPU per turn by process kind (from /proc, see
benchmarks/load.py). The baseline, measured in the same run: the same turns run one after another in this
process without broker or sockets — `chat_send`, then the worker's task body right at commit (Celery's
eager mode) — half before the load and half after, giving the CPU per turn of the turn's own work.

Each person has a project with six tasks and asks "what are my open tasks?": the offline model then makes
one real read (`tracker_task_list` filtered to the open ones) and answers with what it found — two model
calls and one tool call, three finished steps a turn.

The society, in the same sitting: the same load (as many turns from as many other people, the same data and
question) sent to a second daphne whose new chats are under the demo society (ASSISTANT_SPEC=orchestrator, the
site's own default), on the same worker, database and Redis, right after the single assistant's load
(BENCH_THROUGHPUT_SOCIETY=before sends it first, =off leaves it out). Its turn is the orchestrator's run, which
becomes the reader's run when the request is plainly the reader's (routed without a model call), or else hands
the read to the reader after one model call and takes the reader's answer as its reply. Figures: turns/s and time
to reply for both, the ratio society / single against the goal of ≥ 0.9×, CPU per turn, and what a turn was made
of (runs, model calls and steps, from the rows; turns routed without a call). BENCH_THROUGHPUT_CLERK_RECORD=1 first
gives the clerk a record in the registry (five tasks added through the society), as on a site in use: routing then
goes by the records, which may leave a turn to the orchestrator's model.

Size: BENCH_THROUGHPUT_TURNS (1000), BENCH_THROUGHPUT_PEOPLE (100), BENCH_THROUGHPUT_BASELINE_TURNS (100): the
society's load is the same size, so about twice the time; a smaller TURNS makes both smaller.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.test import override_settings

from benchmarks import percentile
from benchmarks.load import Person, Stack, Tab, cpu_seconds, env_size, open_tabs, people, stack

MODEL = "offline"
QUESTION = "what are my open tasks?"
#: The single assistant (every tool) and the demo society's orchestrator: what new chats get on each daphne.
SINGLE, SOCIETY = "default", "orchestrator"
#: The society's throughput against the single assistant's, under the same load in the same sitting.
GOAL_SOCIETY_RATIO = 0.9
SOCIETY_ORDERS = ("after", "before", "off")
TABS_PER_PERSON = 2
GOAL_TURNS_PER_SECOND = 25.0
GOAL_CORES = 2  # the machine the goal is set for
WORKER_POOL = 2  # `make run`'s worker concurrency, which `stack` starts
SERVER_KINDS = ("web", "worker", "postgres", "redis")
BASELINE_KINDS = ("client", "postgres", "redis")
BASELINE_WARMUP_TURNS = 3
# What a tab may see besides the run's own progress; any of these fails the benchmark.
FAILURE_EVENTS = {"assistant.error", "assistant.reply_failed", "assistant.cancelled", "assistant.resync",
                  "assistant.session_ended", "assistant.thread_failed"}
# How quiet (CPU seconds in a half-second window) the worker must be for its after-reply work to be done.
IDLE_WORKER_SECONDS = 0.03
IDLE_WAIT_MAX_SECONDS = 20.0
# How long the tabs stay open before anything is sent, to measure what open tabs cost by themselves.
IDLE_SECONDS = 5.0


@dataclass
class Counts:
    """What was answered, by the database and by the sockets."""

    turns: int
    runs_by_status: dict[str, int]
    reply_messages: int
    replied_frames: int
    finished_step_rows: int
    finished_steps_seen: int
    requeued_runs: int
    claimed_more_than_once: int
    #: Runs that members of the society worked (every one of them ended too): 0 for the single assistant.
    member_runs: int = 0


@dataclass
class Shape:
    """What the turns were made of, from the rows: a turn's tree of runs and its steps, averaged over the turns."""

    runs_per_turn: float
    model_calls_per_turn: float
    steps_per_turn: float
    tool_calls_per_turn: float
    #: Turns whose run a plain request made its member's without a model call (its settings' `routed`).
    routed_turns: int


@dataclass
class Result:
    people: int
    turns: int
    counts: Counts
    turns_per_second: float
    reply_seconds: list[float]
    #: CPU seconds a turn, by kind, under load (SERVER_KINDS and "client") and in the baseline (BASELINE_KINDS).
    cpu_per_turn: dict[str, float]
    #: The baseline's halves (before the load, after it): CPU seconds a turn by kind, and turns.
    baseline_cpu_per_turn: list[dict[str, float]]
    baseline_turns: list[int]
    baseline_seconds_per_turn: list[float]
    #: Frames the tabs received a turn (both tabs), by type.
    frames_per_turn: dict[str, float]
    #: Seconds of the CPU reading's window (first send → the worker idle after the last reply).
    cpu_window_seconds: float
    #: The machine's one-minute load average when the load started and when it ended.
    load_average: tuple[float, float]
    #: Each run's time in the worker from its claim to its end (`started_at` → `finished_at`).
    claim_to_finish_seconds: list[float]
    #: From the first send to the last run row written (daphne storing the messages), in seconds.
    stored_within_seconds: float
    #: CPU seconds a second, by kind, with every tab open and nothing sent (before the load).
    idle_cpu_per_second: dict[str, float]
    #: The spec of the load's chats, and what its turns were made of.
    spec: str = SINGLE
    shape: Shape | None = None
    #: The same load under the society in the same sitting (its baseline fields are the single assistant's).
    society: Result | None = None


def _shares(total: int, parts: int) -> list[int]:
    """`total` split over `parts` as evenly as possible, the larger shares first."""
    return [total // parts + (1 if number < total % parts else 0) for number in range(parts)]


def _give_tracker_data(crowd: list[Person]) -> None:
    """Each person's project "Home" with three open and three finished tasks, for the read to find."""
    from tracker.models import Project, Task

    projects = Project.objects.bulk_create([Project(owner_id=person.user_id, name="Home") for person in crowd])
    tasks = [("Water plants", "todo"), ("Write report", "doing"), ("Call the plumber", "todo"),
             ("File taxes", "done"), ("Fix the gate", "done"), ("Buy milk", "done")]
    Task.objects.bulk_create([Task(project=project, title=title, status=status, created_by_id=project.owner_id)
                              for project in projects for title, status in tasks])


def _per_turn(before: dict[str, float], after: dict[str, float], kinds: tuple[str, ...],
              turns: int) -> dict[str, float]:
    return {kind: (after[kind] - before[kind]) / turns for kind in kinds}


# --- the baseline: the same turns in this process ---------------------------------------------------

def _baseline(site: Stack, crowd: list[Person], shares: list[int]) -> tuple[dict[str, float], list[float]]:
    """Each person's turns one after another in this process: `chat_send` as the socket calls it (with the
    person's session), and the worker's task body run right here when the send commits (Celery's eager
    mode). Returns the CPU seconds a turn by kind (this process, PostgreSQL, Redis) and each turn's time."""
    from django.contrib.auth import get_user_model

    from assistant.access.authority import SentFrom
    from assistant.conversation.services import chat_send
    from assistant.models import AgentRun
    from assistant.tasks import run_turn

    users = get_user_model().objects.in_bulk([person.user_id for person in crowd])
    seconds = []
    eager = run_turn.app.conf.task_always_eager
    run_turn.app.conf.task_always_eager = True
    # Celery logs each eager task at INFO here; a worker started as `make run` does logs nothing per task.
    trace_log = logging.getLogger("celery.app.trace")
    trace_level = trace_log.level
    trace_log.setLevel(logging.WARNING)
    try:
        with override_settings(ASSISTANT={**settings.ASSISTANT, "MODEL": site.model, "SPEC": "default"}):
            before = cpu_seconds(site)
            for person, share in zip(crowd, shares, strict=True):
                sent_from = SentFrom(session_key=person.session_key, client_address="127.0.0.1", origin=site.origin)
                for _ in range(share):
                    started = time.perf_counter()
                    chat_send(user=users[person.user_id], content=QUESTION, new_chat=True, sent_from=sent_from)
                    seconds.append(time.perf_counter() - started)
            after = cpu_seconds(site)
    finally:
        run_turn.app.conf.task_always_eager = eager
        trace_log.setLevel(trace_level)
    statuses = Counter(AgentRun.objects.filter(owner_id__in=users).values_list("status", flat=True))
    if statuses != {AgentRun.Status.SUCCEEDED: sum(shares)}:
        raise AssertionError(f"the baseline's turns did not all succeed: {dict(statuses)}")
    return _per_turn(before, after, BASELINE_KINDS, sum(shares)), seconds


# --- the load ------------------------------------------------------------------------------------

@dataclass
class _Load:
    tabs: list[Tab]
    sent_at: dict[str, float]
    first_send: float
    #: time.time() at the first send, to compare with the rows' timestamps.
    first_send_wall: float
    idle_cpu_per_second: dict[str, float]
    cpu_before: dict[str, float]
    cpu_after: dict[str, float]
    cpu_window_seconds: float
    load_average: tuple[float, float]


def _failures(tab: Tab) -> list[dict[str, Any]]:
    return [frame for _, frame in tab.frames if frame.get("type") in FAILURE_EVENTS]


def _replied_runs(tab: Tab) -> set[Any]:
    return {frame["run_id"] for _, frame in tab.frames if frame.get("type") == "assistant.replied"}


async def _until_answered(tabs: list[Tab], expected: dict[Tab, int], timeout: float) -> None:
    """Until every tab has seen `assistant.replied` for each of its person's messages; fails at the first
    failure event a tab receives, and after `timeout` seconds."""
    started = time.monotonic()
    said = started
    total = sum(expected.values())
    while True:
        answered = sum(min(len(_replied_runs(tab)), expected[tab]) for tab in tabs)
        failed = [(tab.person.username, tab.number, frame) for tab in tabs for frame in _failures(tab)]
        closed = [(tab.person.username, tab.number, tab.close_code) for tab in tabs if tab.close_code is not None]
        if failed or closed:
            raise AssertionError(f"{len(failed)} failure events and {len(closed)} closed tabs, e.g. "
                                 f"{(failed or closed)[:3]}")
        if answered == total:
            return
        now = time.monotonic()
        if now - started > timeout:
            raise AssertionError(f"after {timeout:.0f}s the tabs have seen {answered} of {total} replies")
        if now - said >= 10:
            print(f"  … {answered // TABS_PER_PERSON} of {total // TABS_PER_PERSON} turns answered after "
                  f"{now - started:.0f}s", flush=True)
            said = now
        # Times come from the frames' own receipt stamps: how often this looks changes none of them.
        await asyncio.sleep(0.5)


async def _until_worker_idle(site: Stack) -> None:
    """Until the worker's after-reply work (memories, the run's profile) is done: its CPU goes quiet."""
    deadline = time.monotonic() + IDLE_WAIT_MAX_SECONDS
    last = cpu_seconds(site)["worker"]
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = cpu_seconds(site)["worker"]
        if now - last < IDLE_WORKER_SECONDS:
            return
        last = now


async def _load(site: Stack, crowd: list[Person], shares: list[int], timeout: float,
                idle_seconds: float = IDLE_SECONDS, spec: str | None = None) -> _Load:
    tabs = await open_tabs(site, crowd, TABS_PER_PERSON, spec=spec)
    own_tabs = {person.user_id: [tab for tab in tabs if tab.person is person] for person in crowd}
    expected = {tab: share for person, share in zip(crowd, shares, strict=True) for tab in own_tabs[person.user_id]}
    sent_at: dict[str, float] = {}

    async def send_all(person: Person, share: int) -> None:
        sender = own_tabs[person.user_id][0]
        for number in range(share):
            request_id = f"{person.user_id}:{number}"
            sent_at[request_id] = time.monotonic()
            await sender.send({"type": "assistant.send", "content": QUESTION, "new_chat": True,
                               "request_id": request_id})

    try:
        # The tabs open, nothing sent: what the site spends to keep them (each socket re-checks its session).
        idle_before, idle_started = cpu_seconds(site), time.monotonic()
        await asyncio.sleep(idle_seconds)
        idle = {kind: (spent - idle_before[kind]) / (time.monotonic() - idle_started)
                for kind, spent in cpu_seconds(site).items()}
        load_before = os.getloadavg()[0]
        cpu_before = cpu_seconds(site)
        first_send, first_send_wall = time.monotonic(), time.time()
        await asyncio.gather(*(send_all(person, share) for person, share in zip(crowd, shares, strict=True)))
        await _until_answered(tabs, expected, timeout)
        # Late duplicates would come now.
        await asyncio.sleep(0.5)
        await _until_worker_idle(site)
        cpu_after = cpu_seconds(site)
        cpu_window = time.monotonic() - first_send
    finally:
        await asyncio.gather(*(tab.close() for tab in tabs))
    return _Load(tabs=tabs, sent_at=sent_at, first_send=first_send, first_send_wall=first_send_wall,
                 idle_cpu_per_second=idle, cpu_before=cpu_before, cpu_after=cpu_after, cpu_window_seconds=cpu_window,
                 load_average=(load_before, os.getloadavg()[0]))


def _timings(load: _Load) -> tuple[list[float], float]:
    """Each message's time from its send to `assistant.replied` on the tab that sent it, and when the last
    reply arrived."""
    reply_seconds, last_reply = [], load.first_send
    for tab in load.tabs:
        if tab.number != 1:
            continue
        run_of = {frame["request_id"]: frame["run_id"] for _, frame in tab.frames
                  if frame.get("type") == "assistant.sent" and frame.get("request_id") in load.sent_at}
        replied_at = {frame["run_id"]: received for received, frame in tab.frames
                      if frame.get("type") == "assistant.replied"}
        for request_id, run_id in run_of.items():
            reply_seconds.append(replied_at[run_id] - load.sent_at[request_id])
            last_reply = max(last_reply, replied_at[run_id])
    return reply_seconds, last_reply


def _count(crowd: list[Person], shares: list[int], tabs: list[Tab]) -> Counts:
    """Every message answered exactly once, in the database and on both tabs; AssertionError saying what
    differs otherwise. A message's run may have asked members (the society): every run of its tree must have
    succeeded, the top run answers the chat, and every finished step of the tree reaches both tabs."""
    from assistant.models import AgentMessage, AgentRun, AgentStep

    owners = [person.user_id for person in crowd]
    turns = sum(shares)
    runs = AgentRun.objects.filter(owner_id__in=owners)
    runs_by_status = dict(Counter(runs.values_list("status", flat=True)))
    replies = Counter(AgentMessage.objects.filter(owner_id__in=owners, role=AgentMessage.Role.ASSISTANT)
                      .values_list("run_id", flat=True))
    every_owner = dict(runs.values_list("pk", "owner_id"))
    # The runs the messages started: the ones the chat's replies belong to.
    run_owner = dict(runs.filter(parent__isnull=True).values_list("pk", "owner_id"))
    member_runs = len(every_owner) - len(run_owner)
    finished: dict[int, set[tuple[int, int]]] = {owner: set() for owner in owners}
    for run_id, seq in AgentStep.objects.filter(run__owner_id__in=owners, state=AgentStep.State.FINISHED) \
            .values_list("run_id", "seq"):
        finished[every_owner[run_id]].add((run_id, seq))

    problems = []
    if len(run_owner) != turns or set(runs_by_status) != {AgentRun.Status.SUCCEEDED}:
        problems.append(f"runs by status {runs_by_status} ({len(run_owner)} top runs), expected {turns} top runs "
                        "and every run succeeded")
    if set(replies) != set(run_owner) or set(replies.values()) != {1}:
        problems.append(f"{sum(replies.values())} reply messages for {len(replies)} of {len(run_owner)} runs")
    replied_frames = finished_seen = 0
    for tab in tabs:
        runs_of_person = {run for run, owner in run_owner.items() if owner == tab.person.user_id}
        replied = Counter(frame["run_id"] for _, frame in tab.frames if frame.get("type") == "assistant.replied")
        replied_frames += sum(replied.values())
        if set(replied) != runs_of_person or set(replied.values()) - {1}:
            problems.append(f"tab {tab.number} of {tab.person.username}: replies {dict(replied)}, runs "
                            f"{sorted(runs_of_person)}")
        seen = {(frame["run_id"], frame["step"]["seq"]) for _, frame in tab.frames
                if frame.get("type") == "assistant.step" and frame["step"]["state"] == AgentStep.State.FINISHED}
        finished_seen += len(seen)
        if seen != finished[tab.person.user_id]:
            problems.append(f"tab {tab.number} of {tab.person.username}: saw {len(seen)} finished steps of "
                            f"{len(finished[tab.person.user_id])}")
    counts = Counts(
        turns=turns, runs_by_status=runs_by_status, reply_messages=sum(replies.values()),
        replied_frames=replied_frames, finished_step_rows=sum(len(steps) for steps in finished.values()),
        finished_steps_seen=finished_seen, requeued_runs=runs.filter(requeued_at__isnull=False).count(),
        claimed_more_than_once=runs.filter(attempts__gt=1).count(), member_runs=member_runs,
    )
    members = f" ({member_runs} of them members' runs)" if member_runs else ""
    print(f"answered: {counts.turns} messages → runs {counts.runs_by_status}{members}, {counts.reply_messages} reply "
          f"messages; assistant.replied frames {counts.replied_frames} of {TABS_PER_PERSON * turns} "
          f"({TABS_PER_PERSON} tabs a person); finished steps seen {counts.finished_steps_seen} of "
          f"{TABS_PER_PERSON * counts.finished_step_rows} ({counts.finished_step_rows} rows × {TABS_PER_PERSON} tabs)")
    print(f"runs the sweeper re-enqueued while they waited in the queue: {counts.requeued_runs}; runs claimed "
          f"more than once: {counts.claimed_more_than_once}")
    if problems:
        raise AssertionError("not every message was answered exactly once, or not seen by both tabs:\n  "
                             + "\n  ".join(problems[:20]))
    return counts


def _claim_to_finish(crowd: list[Person]) -> list[float]:
    from assistant.models import AgentRun

    # The top runs: a member's run is worked inside its asker's (the worker holds both).
    rows = AgentRun.objects.filter(owner_id__in=[person.user_id for person in crowd], parent__isnull=True) \
        .values_list("started_at", "finished_at")
    # Every run has ended (checked before): each was claimed and finished.
    return [(finished - started).total_seconds() for started, finished in rows if started and finished]


def _stored_within(crowd: list[Person], load: _Load) -> float:
    """Seconds from the first send until daphne had stored the last message's run row."""
    from django.db.models import Max

    from assistant.models import AgentRun

    last = AgentRun.objects.filter(owner_id__in=[person.user_id for person in crowd], parent__isnull=True) \
        .aggregate(Max("created_at"))
    # The two clocks meet at the load's start: the wall clock read then, beside the monotonic one.
    return (last["created_at__max"].timestamp() - load.first_send_wall)


def _shape(crowd: list[Person], turns: int) -> Shape:
    """What the crowd's turns were made of, from their rows."""
    from assistant.models import AgentRun, AgentStep

    owners = [person.user_id for person in crowd]
    kinds = Counter(AgentStep.objects.filter(run__owner_id__in=owners).values_list("kind", flat=True))
    routed = AgentRun.objects.filter(owner_id__in=owners, parent__isnull=True, config__has_key="routed").count()
    return Shape(runs_per_turn=AgentRun.objects.filter(owner_id__in=owners).count() / turns,
                 model_calls_per_turn=kinds[AgentStep.Kind.MODEL_CALL] / turns,
                 steps_per_turn=sum(kinds.values()) / turns,
                 tool_calls_per_turn=kinds[AgentStep.Kind.TOOL_CALL] / turns, routed_turns=routed)


def measure(*, turns: int, people_count: int, baseline_turns: int, database_name: str = "bench_throughput",
            society: str = "after", clerk_record: bool = False) -> Result:
    """Run the benchmark at this size on a stack of its own; see the module's docstring."""
    specs = (SINGLE,) if society == "off" else (SINGLE, SOCIETY)
    with stack(model=MODEL, database_name=database_name, worker_concurrency=WORKER_POOL, specs=specs) as site:
        return measure_on(site, turns=turns, people_count=people_count, baseline_turns=baseline_turns,
                          society=society, clerk_record=clerk_record)


def _give_the_clerk_a_record(site: Stack) -> None:
    """The society's clerk with a record in the registry, as on a site where tasks were added through it: one
    person adds MIN_SAMPLE tasks through the society's socket (each request routed to the clerk)."""
    from benchmarks.bench_society import _ask, _give_home, _new_chat
    from registry.ranking import MIN_SAMPLE

    [person] = people(1, "clerk-record")
    _give_home(person)
    chats = [_new_chat(person, SOCIETY) for _ in range(MIN_SAMPLE)]

    async def add_tasks() -> None:
        [tab] = await open_tabs(site, [person], 1, spec=SOCIETY)
        try:
            for number, chat_id in enumerate(chats):
                await _ask(tab, chat_id, f"Add the task 'Record {number + 1}' to the project 'Home'", f"record{number}")
        finally:
            await tab.close()

    asyncio.run(add_tasks())


def measure_on(site: Stack, *, turns: int, people_count: int, baseline_turns: int,
               idle_seconds: float = IDLE_SECONDS, society: str = "off", clerk_record: bool = False) -> Result:
    """Run the benchmark at this size on `site` (a stack of MODEL, with a pool of WORKER_POOL); the tabs stay
    open `idle_seconds` before the load to measure what they cost by themselves. `society`: "after" or "before"
    runs the same load under the society (the stack must have a daphne for it) after or before the single
    assistant's, both between the baseline's halves; "off" leaves it out. `clerk_record`: first give the society's
    clerk a record in the registry (see `_give_the_clerk_a_record`): routing then tells it from the reader, which
    has one after its first few runs, and routes the list to the reader without a model call."""
    from assistant.conf import assistant_settings

    if society not in SOCIETY_ORDERS:
        raise ValueError(f"society must be one of {', '.join(SOCIETY_ORDERS)}, not {society!r}")
    order = {"after": [SINGLE, SOCIETY], "before": [SOCIETY, SINGLE], "off": [SINGLE]}[society]
    missing = [spec for spec in order if spec not in site.specs]
    if missing:
        raise ValueError(f"the stack has no daphne for {missing} (it has {site.specs})")
    shares = _shares(turns, people_count)
    limit = assistant_settings.RUNS_PER_MINUTE
    if shares[0] > limit:
        raise ValueError(f"{shares[0]} messages a person is over RUNS_PER_MINUTE ({limit}): add people")
    halves = _shares(baseline_turns, 2)
    # Each load's own people (the rate limit and the registry's records are per person).
    crowds = {spec: people(people_count, "load" if spec == SINGLE else f"load-{spec}") for spec in order}
    # The baseline's people: up to ten turns each, a crowd for each half.
    baseline_crowds = [people(-(-half // 10), f"baseline{number}") for number, half in enumerate(halves)]
    warm = people(1, "warm")
    _give_tracker_data([*(person for crowd in crowds.values() for person in crowd), *warm,
                        *(person for group in baseline_crowds for person in group)])
    # This process's first turns import and load what a worker loads when it starts.
    _baseline(site, warm, [BASELINE_WARMUP_TURNS])
    if clerk_record and society != "off":
        _give_the_clerk_a_record(site)

    baseline_cpu: list[dict[str, float]] = []
    baseline_seconds: list[float] = []

    def baseline_half(number: int) -> None:
        group = baseline_crowds[number]
        cpu, seconds = _baseline(site, group, _shares(halves[number], len(group)))
        baseline_cpu.append(cpu)
        baseline_seconds.extend(seconds)

    baseline_half(0)
    loads = {}
    for spec in order:
        print(f"load: {turns} turns under {spec!r}", flush=True)
        loads[spec] = asyncio.run(_load(site, crowds[spec], shares, timeout=max(60.0, 0.5 * turns),
                                        idle_seconds=idle_seconds, spec=spec))
    baseline_half(1)
    results = {}
    for spec in order:
        crowd, load = crowds[spec], loads[spec]
        print(f"{spec!r}: ", end="")
        counts = _count(crowd, shares, load.tabs)
        reply_seconds, last_reply = _timings(load)
        results[spec] = Result(
            people=people_count, turns=turns, counts=counts, turns_per_second=turns / (last_reply - load.first_send),
            reply_seconds=reply_seconds,
            cpu_per_turn=_per_turn(load.cpu_before, load.cpu_after, (*SERVER_KINDS, "client"), turns),
            baseline_cpu_per_turn=baseline_cpu, baseline_turns=halves, baseline_seconds_per_turn=baseline_seconds,
            frames_per_turn={kind: number / turns for kind, number in
                             Counter(str(frame.get("type")) for tab in load.tabs for _, frame in tab.frames)
                             .most_common()},
            cpu_window_seconds=load.cpu_window_seconds, load_average=load.load_average,
            claim_to_finish_seconds=_claim_to_finish(crowd),
            stored_within_seconds=_stored_within(crowd, load),
            idle_cpu_per_second=load.idle_cpu_per_second,
            spec=spec, shape=_shape(crowd, turns),
        )
    single = results[SINGLE]
    single.society = results.get(SOCIETY)
    return single


def cores() -> int:
    """The cores this process may run on: its affinity, which a container or `taskset` narrows, where the
    system has one; else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _ratio(ours: float, baseline: float) -> str:
    # CPU times come in clock ticks (10 ms): a tiny run may measure none.
    return f"{ours / baseline:.2f}×" if baseline > 0 else "n/a (no CPU time measured)"


def report(result: Result) -> None:
    ms = {kind: seconds * 1000 for kind, seconds in result.cpu_per_turn.items()}
    site = sum(ms[kind] for kind in SERVER_KINDS)
    baseline = {kind: statistics.fmean(half[kind] for half in result.baseline_cpu_per_turn) * 1000
                for kind in BASELINE_KINDS}
    baseline_total = sum(baseline.values())
    halves = [sum(half.values()) * 1000 for half in result.baseline_cpu_per_turn]
    ratio = result.turns_per_second / GOAL_TURNS_PER_SECOND
    machine = cores()
    used = site / 1000 * result.turns / (result.cpu_window_seconds * machine)
    print(f"size: {result.people} people × {TABS_PER_PERSON} tabs, {result.turns} turns "
          f"({result.turns // result.people} a person, each in a new chat, all sent at once), model {MODEL!r}; "
          f"baseline {sum(result.baseline_turns)} turns in this process "
          f"({' before, '.join(str(n) for n in result.baseline_turns)} after the load"
          f"{'s' if result.society is not None else ''})")
    print(f"the single assistant ({result.spec!r}):")
    elsewhere = "" if machine == GOAL_CORES else f"; this machine has {machine}, so the ratio is not the goal's"
    print(f"throughput: {result.turns_per_second:.1f} turns/s (first send → last reply); goal ≥ "
          f"{GOAL_TURNS_PER_SECOND:.0f} on {GOAL_CORES} cores: ratio {ratio:.2f} ({'met' if ratio >= 1 else 'NOT met'}"
          f"{elsewhere})")
    print(f"time to reply (send → replied on the sending tab): p50 {statistics.median(result.reply_seconds):.1f} s, "
          f"p95 {percentile(result.reply_seconds, 0.95):.1f} s (mostly the queue: all were sent at once); daphne "
          f"had stored every message {result.stored_within_seconds:.1f} s after the first send "
          f"({result.turns / max(result.stored_within_seconds, 1e-3):.0f} sends/s)")
    print("CPU per turn under load: " + ", ".join(f"{kind} {ms[kind]:.1f} ms" for kind in SERVER_KINDS)
          + f" = {site:.1f} ms of the site's processes (+ client {ms['client']:.1f} ms: the tabs)")
    print("  shares of the site's CPU: " + ", ".join(f"{kind} {ms[kind] / site:.0%}" for kind in SERVER_KINDS)
          + f"; at that cost {machine} cores allow at most {machine * 1000 / site:.1f} turns/s")
    idle = {kind: result.idle_cpu_per_second[kind] * result.cpu_window_seconds / result.turns * 1000
            for kind in SERVER_KINDS}
    print(f"  of which keeping {result.people * TABS_PER_PERSON} tabs open (measured with nothing sent, "
          "spread over the load's window): "
          + ", ".join(f"{kind} {idle[kind]:.1f} ms" for kind in SERVER_KINDS) + " a turn")
    print(f"  the site's processes used {used:.0%} of {machine} cores over {result.cpu_window_seconds:.0f}s; the "
          f"machine's load average went {result.load_average[0]:.1f} → {result.load_average[1]:.1f} "
          "(the machine may be shared: absolute figures are noisy, ratios less so)")
    in_turns = sum(result.claim_to_finish_seconds) / (WORKER_POOL * result.turns / result.turns_per_second)
    print(f"  the worker's pool of {WORKER_POOL}: claim → run finished p50 "
          f"{statistics.median(result.claim_to_finish_seconds) * 1000:.0f} ms a turn; its processes spent "
          f"{in_turns:.0%} of the load inside turns (claim → finished), the rest between them (after-reply work, "
          "taking the next task)")
    print("  frames a turn on the sockets (both tabs): "
          + ", ".join(f"{kind} {number:.1f}" for kind, number in result.frames_per_turn.items()))
    seconds = result.baseline_seconds_per_turn
    print("baseline, the same turn in one process without broker or sockets, CPU per turn: "
          + ", ".join(f"{'in-process' if kind == 'client' else kind} {baseline[kind]:.1f} ms"
                      for kind in BASELINE_KINDS)
          + f" = {baseline_total:.1f} ms (halves {', '.join(f'{half:.1f}' for half in halves)}); "
          f"wall p50 {statistics.median(seconds) * 1000:.1f} ms a turn")
    print(f"ours / baseline, CPU per turn: {_ratio(site, baseline_total)} (broker, sockets, queueing and delivery "
          f"to {TABS_PER_PERSON} tabs: {site - baseline_total:.1f} ms a turn); worker / in-process "
          f"{_ratio(ms['worker'], baseline['client'])}, postgres {_ratio(ms['postgres'], baseline['postgres'])}")
    if result.shape is not None:
        print(f"a turn's rows: {_shape_said(result.shape, result.turns)}")
    if result.society is not None:
        report_society(result, result.society)


def _shape_said(shape: Shape, turns: int) -> str:
    return (f"{shape.runs_per_turn:.2f} runs, {shape.model_calls_per_turn:.2f} model calls, "
            f"{shape.tool_calls_per_turn:.2f} tool calls (delegations included), {shape.steps_per_turn:.2f} steps; "
            f"routed without a call: {shape.routed_turns} of {turns} turns")


def _cpu_ms(result: Result) -> float:
    return sum(result.cpu_per_turn[kind] for kind in SERVER_KINDS) * 1000


def report_society(single: Result, society: Result) -> None:
    """The society beside the single assistant, under the same load in the same sitting."""
    ratio = society.turns_per_second / single.turns_per_second
    print(f"the society ({society.spec!r}), the same load from {society.people} other people on a daphne of its own, "
          "the same worker, database and Redis:")
    print(f"  throughput: {society.turns_per_second:.1f} turns/s against the single assistant's "
          f"{single.turns_per_second:.1f}: society / single {ratio:.2f}× (goal ≥ {GOAL_SOCIETY_RATIO}×: "
          f"{'met' if ratio >= GOAL_SOCIETY_RATIO else 'NOT met'})")
    for name, values in (("time to reply (send → replied)", "reply_seconds"),
                         ("claim → run finished in the worker", "claim_to_finish_seconds")):
        ours, theirs = getattr(society, values), getattr(single, values)
        scale, unit = (1, "s") if values == "reply_seconds" else (1000, "ms")
        print(f"  {name}: p50 {statistics.median(ours) * scale:.{1 if scale == 1 else 0}f} {unit} "
              f"(single {statistics.median(theirs) * scale:.{1 if scale == 1 else 0}f}), "
              f"p95 {percentile(ours, 0.95) * scale:.{1 if scale == 1 else 0}f} {unit} "
              f"(single {percentile(theirs, 0.95) * scale:.{1 if scale == 1 else 0}f}); "
              f"×{statistics.median(ours) / statistics.median(theirs):.2f} at the median")
    ms = {kind: seconds * 1000 for kind, seconds in society.cpu_per_turn.items()}
    print("  CPU per turn under load: " + ", ".join(f"{kind} {ms[kind]:.1f} ms" for kind in SERVER_KINDS)
          + f" = {_cpu_ms(society):.1f} ms, {_ratio(_cpu_ms(society), _cpu_ms(single))} the single assistant's "
          f"{_cpu_ms(single):.1f} ms; worker {_ratio(ms['worker'], single.cpu_per_turn['worker'] * 1000)}, "
          f"postgres {_ratio(ms['postgres'], single.cpu_per_turn['postgres'] * 1000)}")
    machine = cores()
    print(f"  at these CPU costs {machine} cores allow at most {machine * 1000 / _cpu_ms(society):.1f} turns/s for the "
          f"society and {machine * 1000 / _cpu_ms(single):.1f} for the single assistant: "
          f"{_ratio(_cpu_ms(single), _cpu_ms(society))} (the ratio a machine of its own would give, were the turns "
          "bound by CPU alone)")
    print(f"  the machine's load average went {society.load_average[0]:.1f} → {society.load_average[1]:.1f} "
          f"(single: {single.load_average[0]:.1f} → {single.load_average[1]:.1f}); the site's processes used "
          f"{_cpu_ms(society) / 1000 * society.turns / (society.cpu_window_seconds * machine):.0%} of {machine} cores "
          f"(single: {_cpu_ms(single) / 1000 * single.turns / (single.cpu_window_seconds * machine):.0%})")
    if society.shape is not None:
        print(f"  a turn's rows: {_shape_said(society.shape, society.turns)}")
    print("  frames a turn on the sockets (both tabs): "
          + ", ".join(f"{kind} {number:.1f}" for kind, number in society.frames_per_turn.items()))


def main() -> None:
    turns = env_size("BENCH_THROUGHPUT_TURNS", 1000)
    people_count = env_size("BENCH_THROUGHPUT_PEOPLE", 100)
    baseline_turns = env_size("BENCH_THROUGHPUT_BASELINE_TURNS", 100, least=2)  # halves before and after
    society = os.environ.get("BENCH_THROUGHPUT_SOCIETY", "after")
    if society not in SOCIETY_ORDERS:
        raise SystemExit(f"BENCH_THROUGHPUT_SOCIETY must be one of {', '.join(SOCIETY_ORDERS)}, not {society!r}")
    clerk_record = os.environ.get("BENCH_THROUGHPUT_CLERK_RECORD", "") not in ("", "0")
    report(measure(turns=turns, people_count=people_count, baseline_turns=baseline_turns, society=society,
                   clerk_record=clerk_record))
