"""What a read over MCP costs: the person's own agent calling `tracker_project_list` at `/assistant/mcp/`
with an access token, against the same tool through the panel's executor in one process, and against the
smallest django-mcpz tool there is, served by the same daphne.

(a) `mcp` — the official SDK's client (`mcp.Client`, streamable HTTP, an httpx2 client carrying the bearer
    header) against daphne serving the site: every request authenticates the token, works out its offer,
    checks the call limit, records the call as a run of channel `mcp` (its run, message and step rows and
    their events) and runs the tool through the executor, as the person, with the site's middleware;
(b) `executor` — `execute_tool(person, "tracker_project_list", {}, spec=...)` in this process: the tool's
    own work, with no HTTP, no token and no record;
(c) `baseline` — one django-mcpz tool that answers a constant with no authentication, at a path of the
    benchmark's own URLconf (`benchmarks/mcp_site/`) in the same daphne, called by the same client: what
    HTTP, the site's middleware and MCP cost before anything of the assistant's.

Each connected client first discovers the server and lists its tools; that is outside the timings, which are
one `tools/call` each, as an agent makes them once it is connected. The three kinds alternate in blocks for
a number of rounds in one sitting (the order turning each round), in a throwaway database, with a person
owning a few projects. Reported: medians, p95s and the spread of the rounds' medians, and the ratios a/b and
a/c with their spread over the rounds. The benchmark fails if an MCP answer differs from the executor's, or
if a call was not recorded as exactly one run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks import percentile
from benchmarks.load import HOST, LOG_DIR, daphne, env_size, throwaway_database

TOOL = "tracker_project_list"
#: The spec of the token and of the executor's calls: the single assistant, which has every tool.
SPEC = "default"
PROJECTS = 5
ROUNDS = 6
CALLS_PER_BLOCK = 25
SETTINGS_MODULE = "benchmarks.mcp_site.settings"
KINDS = ("mcp", "executor", "baseline")


@dataclass
class Result:
    #: Per kind, each round's call times in ms (warm-up calls left out).
    rounds: dict[str, list[list[float]]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    #: MCP calls made (warm-ups included) and the runs of channel mcp the database holds afterwards.
    mcp_calls: int = 0
    mcp_runs: int = 0
    #: One more MCP call, made in this process: its SQL statements, and how many of them were commits.
    queries: int = 0
    commits: int = 0

    def times(self, kind: str) -> list[float]:
        return [value for block in self.rounds[kind] for value in block]

    def ratios(self, over: str, under: str) -> list[float]:
        """Each round's median of `over` / median of `under`."""
        return [statistics.median(a) / statistics.median(b) for a, b in zip(self.rounds[over], self.rounds[under],
                                                                           strict=True)]


async def _mcp_block(url: str, bearer: str | None, tool: str, calls: int, warmup: int
                     ) -> tuple[list[float], Any]:
    """One connected client making `warmup + calls` calls of `tool`: the times of the last `calls`, in ms,
    and the last answer's structured content."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    times: list[float] = []
    answer: Any = None
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        for number in range(warmup + calls):
            started = time.perf_counter()
            result = await client.call_tool(tool, {})
            elapsed = (time.perf_counter() - started) * 1000
            if result.is_error:
                raise RuntimeError(f"{tool} at {url} answered with an error: {result.content}")
            answer = result.structured_content
            if number >= warmup:
                times.append(elapsed)
    return times, answer


def _executor_block(user: Any, calls: int, warmup: int) -> tuple[list[float], Any]:
    from assistant.tools.executor import execute_tool

    times: list[float] = []
    answer: Any = None
    for number in range(warmup + calls):
        started = time.perf_counter()
        outcome = execute_tool(user, TOOL, {}, spec=SPEC)
        elapsed = (time.perf_counter() - started) * 1000
        if outcome.status != "data":
            raise RuntimeError(f"{TOOL} through the executor: {outcome.to_model()}")
        answer = outcome.to_model()
        if number >= warmup:
            times.append(elapsed)
    return times, answer


def _queries_of_one_call(secret: str) -> tuple[int, int]:
    """The SQL of one `tools/call` of TOOL at the endpoint, made in this process with the headers and
    `_meta` an MCP 2026-07-28 client sends (the same view, middleware and code as under daphne)."""
    from django.conf import settings
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    version = "2026-07-28"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": TOOL, "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": version,
                                                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"Authorization": f"Bearer {secret}", "MCP-Protocol-Version": version, "Mcp-Method": "tools/call",
               "Mcp-Name": TOOL, "Accept": "application/json, text/event-stream"}
    # The benchmark's calls of the last minute are past this process's limit (the daphne's is lifted).
    with override_settings(ASSISTANT={**settings.ASSISTANT, "MCP_CALLS_PER_MINUTE": 1_000_000}), \
            CaptureQueriesContext(connection) as captured:
        response = Client().post(reverse("assistant:mcp"), json.dumps(body), content_type="application/json",
                                 headers=headers)
    answer = json.loads(response.content)
    if response.status_code != 200 or answer.get("result", {}).get("isError"):
        raise RuntimeError(f"The call made in this process failed: {response.status_code} {answer}")
    statements = [query["sql"] for query in captured.captured_queries]
    return len(statements), sum(1 for sql in statements if sql.strip().upper().startswith("COMMIT"))


def measure(*, rounds: int = ROUNDS, calls_per_block: int = CALLS_PER_BLOCK,
            database_name: str = "bench_mcp") -> Result:
    """The three kinds of call, in blocks of `calls_per_block` alternating for `rounds` rounds, against a
    daphne on the throwaway database `database_name`."""
    from django.contrib.auth import get_user_model

    from assistant.mcp.channel import MCP
    from assistant.mcp.tokens import token_create
    from assistant.models import AgentRun
    from benchmarks.mcp_site.urls import BASELINE_PATH, BASELINE_TOOL
    from tracker.models import Project

    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / f"{database_name}-web.log"
    result = Result()
    with throwaway_database(database_name) as database_url:
        person = get_user_model().objects.create_user("bench-mcp")
        for number in range(1, PROJECTS + 1):
            Project.objects.create(owner=person, name=f"Project {number}")
        secret = token_create(owner=person, name="benchmark agent", spec=SPEC).secret
        env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
               "LOG_LEVEL": "WARNING"}
        with daphne(env, log) as (_web, port):
            origin = f"http://{HOST}:{port}"
            blocks: dict[str, Callable[[int], tuple[list[float], Any]]] = {
                "mcp": lambda warmup: asyncio.run(_mcp_block(f"{origin}/assistant/mcp/", secret, TOOL,
                                                             calls_per_block, warmup)),
                "executor": lambda warmup: _executor_block(person, calls_per_block, warmup),
                "baseline": lambda warmup: asyncio.run(_mcp_block(f"{origin}/{BASELINE_PATH}", None, BASELINE_TOOL,
                                                                  calls_per_block, warmup)),
            }
            for number in range(rounds):
                warmup = 5 if number == 0 else 2
                answers = {}
                # The order turns each round, so that no kind always follows the same one.
                for kind in KINDS[number % 3:] + KINDS[:number % 3]:
                    times, answers[kind] = blocks[kind](warmup)
                    result.rounds[kind].append(times)
                    if kind == "mcp":
                        result.mcp_calls += warmup + calls_per_block
                # The agent is told exactly what the panel's model would be (dates and the like as JSON text),
                # and always whose text it carries (`others_text`, [] for none: docs/agents.md).
                expected = {"others_text": [], **json.loads(json.dumps(answers["executor"], default=str))}
                if answers["mcp"] != expected:
                    raise RuntimeError(f"The MCP answer {answers['mcp']!r} is not the executor's {expected!r}")
                print(f"  round {number + 1}: " + ", ".join(
                    f"{kind} p50 {statistics.median(result.rounds[kind][-1]):5.2f} ms" for kind in KINDS), flush=True)
        result.queries, result.commits = _queries_of_one_call(secret)
        result.mcp_calls += 1
        result.mcp_runs = AgentRun.objects.filter(owner=person, channel=MCP.value).count()
    if log.exists() and any(mark in log.read_text(errors="replace") for mark in ("Traceback", " ERROR ")):
        print(f"The benchmark's daphne logged errors: see {log}", file=sys.stderr, flush=True)
    if result.mcp_runs != result.mcp_calls:
        raise RuntimeError(f"{result.mcp_calls} MCP calls were made but {result.mcp_runs} runs recorded")
    return result


def _summary(values: list[float], blocks: list[list[float]]) -> str:
    medians = [statistics.median(block) for block in blocks]
    return (f"p50 {statistics.median(values):6.2f} ms, p95 {percentile(values, 0.95):6.2f} ms "
            f"(rounds' p50 {min(medians):.2f}–{max(medians):.2f} ms)")


def main() -> None:
    # The HTTP client logs every request, and django-mcpz every call, at INFO, which the site's logging shows.
    for name in ("httpx2", "django_mcpz.calls"):
        logging.getLogger(name).setLevel(logging.WARNING)
    rounds = env_size("BENCH_MCP_ROUNDS", ROUNDS)
    calls = env_size("BENCH_MCP_CALLS", CALLS_PER_BLOCK)
    print(f"size: {rounds} rounds of {calls} calls a kind (BENCH_MCP_ROUNDS, BENCH_MCP_CALLS), blocks interleaved; "
          f"a person with {PROJECTS} projects, {TOOL} under the spec {SPEC!r}")
    result = measure(rounds=rounds, calls_per_block=calls)
    mcp, executor, baseline = (result.times(kind) for kind in KINDS)
    print(f"(a) {TOOL} over MCP, token, recorded as a run ({len(mcp)} calls): {_summary(mcp, result.rounds['mcp'])}")
    print(f"(b) {TOOL} through the executor in process ({len(executor)} calls): "
          f"{_summary(executor, result.rounds['executor'])}")
    print(f"(c) a trivial django-mcpz tool, same daphne ({len(baseline)} calls):  "
          f"{_summary(baseline, result.rounds['baseline'])}")
    over_executor, over_baseline = result.ratios("mcp", "executor"), result.ratios("mcp", "baseline")
    a, b, c = (statistics.median(values) for values in (mcp, executor, baseline))
    print(f"a/b {a / b:.1f}× (rounds {min(over_executor):.1f}–{max(over_executor):.1f}×): an MCP read costs "
          f"{a - b:.1f} ms more than the tool's own work")
    print(f"a/c {a / c:.1f}× (rounds {min(over_baseline):.1f}–{max(over_baseline):.1f}×): the assistant's part "
          f"(token, offer, limit, record, executor) is {a - c:.1f} ms over an MCP call that does nothing")
    print(f"one MCP call, made in this process: {result.queries} SQL statements, {result.commits} of them commits; "
          f"{result.mcp_calls} calls, {result.mcp_runs} runs recorded")
