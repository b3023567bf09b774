"""What the society costs a request, in model calls, runs and steps: the demo's requests through the demo
society (spec `orchestrator`, which asks `reader`, `clerk` and `keeper`) and through the single assistant (spec
`default`, every tool), with the offline demo model, in the same sitting.

Everything goes as the panel does it, on `make run`'s layout (a Celery worker with a pool of two, daphne, the
throwaway database): a person with a session opens the assistant's socket, sends each request in a chat of the
spec measured (`assistant.send` with its `chat_id`), answers an approval card with `assistant.confirm`
(`approve: true`, naming the card's step) and waits for the top run's `assistant.replied`. The figures are then
read from the rows: the run's tree (the top run and every run with it as root) and the kinds of its steps.

The bound this checks (the issue's proof): for a request that goes to one member, the society makes at most one
model call more than the single assistant, and none more when the request is routed without a call (the top
run became the member's: its settings say `routed`, and why). A request that breaks it is printed as such; the benchmark
fails only when a request did not do its work (a run did not succeed, or the tracker does not show the effect).

Each repetition gives each spec a new person with the same tracker data (the registry's records are per person
and per organisation: a later repetition sees the records the earlier ones left, as a site in use would), and
the order of the specs alternates between repetitions.

Size: BENCH_SOCIETY_REPEATS (3).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from benchmarks.load import Person, Stack, Tab, env_size, open_tabs, people, stack

MODEL = "offline"
SINGLE, SOCIETY = "default", "orchestrator"
LIST = "What are my open tasks?"
#: (name, what the person types); what each should leave in the tracker is checked in `_problems`. The last is the
#: list again once the person has asked it MIN_SAMPLE more times (not measured): by then the registry has a record
#: of the member that answers it, as it soon has on a site in use, and routing reads that record.
REQUESTS = (
    ("list", LIST),
    ("create", "Add the task 'Buy milk' to the project 'Home'"),
    ("Garden", "create a project Garden with the tasks 'water the plants' and 'buy seeds', then tell me my open "
               "tasks"),
    ("delete (approved)", "delete the task 'Buy milk'"),
    ("list, with records", LIST),
)
#: The person's tracker before the requests: alice's project "Home" of the demo data (tracker/demo.py).
HOME_TASKS = (("Fix the kitchen tap", "todo"), ("Book the boiler service", "doing"), ("Sort the recycling", "done"))
REPLY_TIMEOUT_SECONDS = 60.0
FAILURE_EVENTS = {"assistant.error", "assistant.reply_failed", "assistant.cancelled", "assistant.resync",
                  "assistant.session_ended", "assistant.thread_failed"}
DELEGATION_PREFIX = "ask_"
PLAN_TOOL = "assistant_plan"


@dataclass
class Measured:
    """One request of one spec, from its rows."""

    request: str
    spec: str
    top_run_id: int
    seconds: float
    approvals: int
    status: str
    reply: str
    model_calls: int
    runs: int
    #: The specs of the tree's runs, top first, in the order they were made (e.g. orchestrator, reader).
    run_specs: list[str]
    steps: int
    steps_by_kind: dict[str, int]
    #: Tool steps that called a tool of the site (not a delegation or the plan).
    tool_calls: int
    delegations: int
    plans: int
    #: Why the top run's first delegation went without a model call (its step's `routed`), or "".
    routed: str
    #: Model calls per run of the tree, as "spec N".
    calls_by_run: list[str] = field(default_factory=list)

    @property
    def members(self) -> list[str]:
        """The members that did the work: the one a routed request's run became, else those its run asked."""
        return [self.run_specs[0]] if self.routed else sorted(set(self.run_specs[1:]))


# --- the person and their data ----------------------------------------------------------------------------

def _give_home(person: Person) -> None:
    from tracker.models import Project, Task

    home = Project.objects.create(owner_id=person.user_id, name="Home", description="Chores and errands.")
    Task.objects.bulk_create([Task(project=home, title=title, status=status, created_by_id=person.user_id)
                              for title, status in HOME_TASKS])


def _new_chat(person: Person, spec: str) -> int:
    from assistant.models import AgentChat

    return AgentChat.objects.create(owner_id=person.user_id, spec=spec).pk


# --- one request through the socket -----------------------------------------------------------------------

async def _ask(tab: Tab, chat_id: int, content: str, request_id: str) -> tuple[int, float, int]:
    """Send `content` in the chat, approve every card that comes as the panel's Approve does, and wait for the top
    run's reply. Returns (top run id, seconds from the send to `assistant.replied`, approvals given)."""
    start = len(tab.frames)
    started = time.monotonic()
    await tab.send({"type": "assistant.send", "content": content, "chat_id": chat_id, "request_id": request_id})
    _, sent = await tab.wait_for(lambda frame: frame.get("type") in {"assistant.sent", "assistant.error"}
                                 and frame.get("request_id") == request_id, timeout=REPLY_TIMEOUT_SECONDS, start=start)
    if sent["type"] != "assistant.sent":
        raise AssertionError(f"{content!r} was refused: {sent}")
    top = int(sent["run_id"])
    approvals = 0
    position = start
    while True:
        received, frame = await tab.wait_for(
            lambda frame: frame.get("type") in {"assistant.confirm", *FAILURE_EVENTS}
            or (frame.get("type") == "assistant.replied" and frame.get("run_id") == top),
            timeout=REPLY_TIMEOUT_SECONDS, start=position)
        position = next(number for number in range(position, len(tab.frames)) if tab.frames[number][1] is frame) + 1
        kind = frame["type"]
        if kind == "assistant.replied":
            return top, received - started, approvals
        if kind in FAILURE_EVENTS:
            raise AssertionError(f"{content!r}: the tab got {kind}: {frame}")
        step = frame["step"]
        await tab.send({"type": "assistant.confirm", "run_id": step["run_id"], "step_id": step["id"], "approve": True,
                        "request_id": f"{request_id}:confirm{approvals + 1}"})
        approvals += 1


async def _ask_all(site: Stack, person: Person, chats: list[int], tag: str) -> list[tuple[int, float, int]]:
    """The REQUESTS in order, each in its chat of `chats`; before the last, the list MIN_SAMPLE times more in the
    chats that follow (their figures are not kept)."""
    [tab] = await open_tabs(site, [person], 1)
    try:
        asked = []
        for number, (chat_id, (_, content)) in enumerate(zip(chats, REQUESTS[:-1], strict=False)):
            asked.append(await _ask(tab, chat_id, content, f"{tag}:{number}"))
        for number, chat_id in enumerate(chats[len(REQUESTS):]):
            await _ask(tab, chat_id, LIST, f"{tag}:records{number}")
        asked.append(await _ask(tab, chats[len(REQUESTS) - 1], REQUESTS[-1][1], f"{tag}:last"))
        return asked
    finally:
        await tab.close()


# --- the rows ----------------------------------------------------------------------------------------------

def _measured(request: str, spec: str, top_run_id: int, seconds: float, approvals: int) -> Measured:
    from django.db.models import Q

    from assistant.models import AgentRun, AgentStep

    runs = list(AgentRun.objects.filter(Q(pk=top_run_id) | Q(root_id=top_run_id)).order_by("depth", "pk"))
    top = runs[0]
    steps = list(AgentStep.objects.filter(run__in=runs).order_by("run_id", "seq"))
    kinds = Counter(step.kind for step in steps)
    calls_by_run = Counter(step.run_id for step in steps if step.kind == AgentStep.Kind.MODEL_CALL)
    tools = [step for step in steps if step.kind == AgentStep.Kind.TOOL_CALL]
    routed = str((top.config or {}).get("routed", {}).get("reason") or "") if top.routed_from else ""
    return Measured(
        request=request, spec=spec, top_run_id=top.pk, seconds=seconds, approvals=approvals, status=top.status,
        reply=top.reply, model_calls=kinds[AgentStep.Kind.MODEL_CALL], runs=len(runs),
        run_specs=[run.spec for run in runs], steps=len(steps), steps_by_kind=dict(kinds),
        tool_calls=sum(1 for step in tools if not step.tool_name.startswith(DELEGATION_PREFIX)
                       and step.tool_name != PLAN_TOOL),
        delegations=sum(1 for step in tools if step.tool_name.startswith(DELEGATION_PREFIX)),
        plans=sum(1 for step in tools if step.tool_name == PLAN_TOOL), routed=routed,
        calls_by_run=[f"{run.spec} {calls_by_run[run.pk]}" for run in runs],
    )


def _problems(person: Person, measured: list[Measured]) -> list[str]:
    """What the requests should have done and did not: every run of every tree succeeded, and the tracker shows
    the create, the Garden and the delete."""
    from assistant.models import AgentRun
    from tracker.models import Project, Task

    problems = []
    for each in measured:
        statuses = Counter(AgentRun.objects.filter(root_id=each.top_run_id).values_list("status", flat=True))
        statuses[each.status] += 1
        if set(statuses) != {AgentRun.Status.SUCCEEDED}:
            problems.append(f"{each.spec} {each.request!r}: runs {dict(statuses)} (reply: {each.reply[:200]!r})")
    tasks = set(Task.objects.filter(project__owner_id=person.user_id).values_list("project__name", "title"))
    garden = {("Garden", "water the plants"), ("Garden", "buy seeds")}
    if not garden <= tasks or not Project.objects.filter(owner_id=person.user_id, name="Garden").exists():
        problems.append(f"{person.username}: no project Garden with its two tasks; tasks {sorted(tasks)}")
    if ("Home", "Buy milk") in tasks:
        problems.append(f"{person.username}: 'Buy milk' is still in Home after the approved delete")
    delete = next(each for each in measured if each.request.startswith("delete"))
    if delete.approvals != 1:
        problems.append(f"{delete.spec} {delete.request!r}: {delete.approvals} approvals asked, expected one")
    return problems


# --- the sitting -------------------------------------------------------------------------------------------

def measure(repeats: int, database_name: str = "bench_society") -> dict[str, list[list[Measured]]]:
    """Each spec's requests, `repeats` times (a new person each time, the specs' order alternating): by spec, a
    list per repetition of the requests' figures."""
    from assistant.conf import assistant_settings
    from registry.ranking import MIN_SAMPLE

    found: dict[str, list[list[Measured]]] = {SINGLE: [], SOCIETY: []}
    problems: list[str] = []
    with stack(model=MODEL, database_name=database_name) as site:
        # The worker runs each chat's spec, whatever new chats get: the specs measured must be declared.
        missing = {SINGLE, SOCIETY} - set(assistant_settings.SPECS)
        if missing:
            raise RuntimeError(f"The benchmark needs the specs {sorted(missing)} in ASSISTANT['SPECS'].")
        for number in range(repeats):
            for spec in (SINGLE, SOCIETY) if number % 2 == 0 else (SOCIETY, SINGLE):
                [person] = people(1, f"{spec}-{number + 1}")
                _give_home(person)
                chats = [_new_chat(person, spec) for _ in range(len(REQUESTS) + MIN_SAMPLE)]
                asked = asyncio.run(_ask_all(site, person, chats, f"{spec}-{number + 1}"))
                measured = [_measured(name, spec, top, seconds, approvals)
                            for (name, _), (top, seconds, approvals) in zip(REQUESTS, asked, strict=True)]
                found[spec].append(measured)
                problems += _problems(person, measured)
    if problems:
        report(found)
        raise AssertionError("requests that did not do their work:\n  " + "\n  ".join(problems))
    return found


# --- the report --------------------------------------------------------------------------------------------

def _values(values: list[int]) -> str:
    """One value when every repetition gave it, else each in order ("2/3/3")."""
    return str(values[0]) if len(set(values)) == 1 else "/".join(str(value) for value in values)


def _kinds(measured: Measured) -> str:
    parts = [f"{measured.model_calls} model", f"{measured.tool_calls} tool"]
    if measured.delegations:
        parts.append(f"{measured.delegations} ask")
    if measured.plans:
        parts.append(f"{measured.plans} plan")
    if measured.steps_by_kind.get("notice"):
        parts.append(f"{measured.steps_by_kind['notice']} notice")
    return " + ".join(parts)


def _verdict(single: list[Measured], society: list[Measured]) -> tuple[str, bool | None]:
    """Whether the society kept its bound in every repetition: "+1" for a request of one member, "+0" for one
    routed without a call. None: the bound does not apply (a request of several members)."""
    verdicts = []
    for alone, ours in zip(single, society, strict=True):
        if len(ours.members) != 1:
            return f"n/a ({len(ours.members)} members)", None
        bound = 0 if ours.routed else 1
        extra = ours.model_calls - alone.model_calls
        verdicts.append((bound, extra <= bound))
    bounds = {bound for bound, _ in verdicts}
    kept = all(ok for _, ok in verdicts)
    said = {frozenset({0}): "≤ +0 (routed)", frozenset({1}): "≤ +1 (not routed)"}.get(
        frozenset(bounds), "≤ +0 where routed, ≤ +1 where not")
    return f"{'within' if kept else 'NOT within'} {said}", kept


def report(found: dict[str, list[list[Measured]]]) -> list[str]:
    """Prints the table; returns the requests that broke the bound, in words."""
    repeats = min(len(found[SINGLE]), len(found[SOCIETY]))
    if not repeats:
        print("no repetition has both specs' figures to compare")
        return []
    print(f"model {MODEL!r}; each request in a chat of its spec through the socket, approvals given as the panel "
          f"does; {repeats} repetition(s), a new person each (a value per repetition where they differ; steps by "
          "kind: the last repetition's)")
    table: list[tuple[str, ...]] = [("request", "spec", "model calls", "runs", "steps", "steps by kind",
                                     "send → replied p50")]
    notes: dict[int, list[str]] = {}
    broken = []
    for index, (request, _) in enumerate(REQUESTS):
        single = [sitting[index] for sitting in found[SINGLE][:repeats]]
        society = [sitting[index] for sitting in found[SOCIETY][:repeats]]
        for spec, rows in ((SINGLE, single), (SOCIETY, society)):
            table.append((request if spec == SINGLE else "", spec, _values([row.model_calls for row in rows]),
                          _values([row.runs for row in rows]), _values([row.steps for row in rows]), _kinds(rows[-1]),
                          f"{statistics.median(row.seconds for row in rows) * 1000:.0f} ms"))
        extra = [ours.model_calls - alone.model_calls for alone, ours in zip(single, society, strict=True)]
        verdict, kept = _verdict(single, society)
        table.append(("", "difference", "/".join(f"{value:+d}" for value in extra) if len(set(extra)) > 1
                      else f"{extra[0]:+d}", "", "", verdict, ""))
        # A routed request's one run became its member's: said so, rather than as a run of the member alone.
        tree = " / ".join(dict.fromkeys(
            (f"{SOCIETY}'s run became {row.run_specs[0]}'s" if row.routed else " → ".join(row.run_specs))
            for row in society))
        routed = [bool(row.routed) for row in society]
        routed_said = ("routed without a call" if all(routed) else "not routed: the orchestrator's model chose"
                       if not any(routed) else "routed without a call in repetition(s) " + ", ".join(
                           str(number + 1) for number, was in enumerate(routed) if was) + "; the model chose in the "
                       "others")
        notes[len(table) - 1] = [f"{routed_said}; the society's runs: {tree}",
                                 f"model calls by run (last repetition): {', '.join(society[-1].calls_by_run)}"]
        if kept is False:
            worst = max(zip(single, society, strict=True), key=lambda pair: pair[1].model_calls - pair[0].model_calls)
            broken.append(f"{request}: the society made {worst[1].model_calls} model calls against the single "
                          f"assistant's {worst[0].model_calls} ({', '.join(worst[1].calls_by_run)}; "
                          f"{'routed: ' + worst[1].routed if worst[1].routed else 'not routed'})")
    widths = [max(len(row[column]) for row in table if column != 5 or row[1] != "difference")
              for column in range(len(table[0]))]
    right = {2, 3, 4, 6}
    for number, row in enumerate(table):
        cells = [cell.rjust(width) if column in right else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(row, widths, strict=True))]
        if row[1] == "difference":  # the verdict runs on past its column
            cells = [*cells[:5], row[5]]
        print("  ".join(cells).rstrip())
        if number == 0:
            print("-" * (sum(widths) + 2 * (len(widths) - 1)))
        for note in notes.get(number, []):
            print(" " * (widths[0] + 2) + note)
    print("the bound (the issue's proof): a request of one member costs the society at most one model call more "
          "than the single assistant (≤ +1), and none more (≤ +0) when it was routed without a call")
    for line in broken:
        print(f"  NOT within the bound — {line}")
    if not broken:
        print("  every request of one member is within it, in every repetition")
    return broken


def main() -> None:
    report(measure(env_size("BENCH_SOCIETY_REPEATS", 3)))
