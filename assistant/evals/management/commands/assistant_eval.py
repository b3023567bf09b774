"""`manage.py assistant_eval`: eval sets from the command line, for a team that keeps them in its repository.

    assistant_eval add SET RUN_ID...        add recorded runs to SET (making it)
    assistant_eval propose [--days N]       the runs worth a case: thumbs down, or failed
    assistant_eval list [SET]               the sets, or one set's cases
    assistant_eval export SET [--out FILE]  the set as JSON (stdout by default)
    assistant_eval import FILE [--replace]  a set from its JSON ("-" reads stdin)
    assistant_eval run SET [--model M] [--instructions FILE] [--spec S] [--baseline recorded|EVAL_RUN]
                       [--json] [--timeout SECONDS]
                                            replay SET on the workers, print the report, and exit non-zero
                                            when a case that passed in the baseline fails
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.evals.cases import (
    PROPOSE_DAYS,
    BadExport,
    CaseRefused,
    case_add,
    proposal_reason,
    proposed_runs,
    set_export,
    set_import,
    set_named,
    tool_calls_of,
)
from assistant.evals.models import EvalRun, EvalSet
from assistant.evals.replays import Candidate, EvalRefused, eval_run_progress, eval_run_refresh, eval_run_start
from assistant.evals.report import eval_report, report_table
from assistant.models import AgentRun


class Command(BaseCommand):
    help = "Make eval sets from recorded runs, list, export and import them."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="add|propose|list|export|import|run")
        add = actions.add_parser("add", help="Add recorded runs to a set, making it if needed.")
        add.add_argument("set")
        add.add_argument("run_ids", nargs="+", type=int, metavar="RUN_ID")
        propose = actions.add_parser("propose", help="Runs worth a case: rated thumbs down, or failed.")
        propose.add_argument("--days", type=int, default=PROPOSE_DAYS)
        listing = actions.add_parser("list", help="The sets, or one set's cases.")
        listing.add_argument("set", nargs="?")
        export = actions.add_parser("export", help="A set as JSON.")
        export.add_argument("set")
        export.add_argument("--out", default="-", help="A file to write (default: stdout).")
        load = actions.add_parser("import", help="A set from its JSON.")
        load.add_argument("file", help='The JSON file ("-": stdin).')
        load.add_argument("--replace", action="store_true", help="Keep exactly the file's cases.")
        run = actions.add_parser("run", help="Replay a set against a candidate and report.")
        run.add_argument("set")
        run.add_argument("--model", help="The candidate's model (default: each spec's own).")
        run.add_argument("--instructions", help="A file of the candidate's instructions (default: the spec's).")
        run.add_argument("--spec", help="Replay every case under this spec (default: each case's own).")
        run.add_argument("--label", default="candidate", help="The candidate's name in the report.")
        run.add_argument("--baseline", default="recorded", help='"recorded" (default) or an earlier eval run.')
        run.add_argument("--json", action="store_true", help="Print the report as JSON.")
        run.add_argument("--timeout", type=float, default=900, help="Seconds to wait for the workers.")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _run(self, options: dict[str, Any]) -> None:
        eval_set = self._set(options["set"])
        instructions = None
        if options["instructions"]:
            try:
                with open(options["instructions"], encoding="utf-8") as file:
                    instructions = file.read()
            except OSError as problem:
                raise CommandError(f"Cannot read {options['instructions']}: {problem}") from None
        candidate = Candidate(label=options["label"], model=options["model"], instructions=instructions,
                              spec=options["spec"])
        try:
            eval_run = eval_run_start(eval_set, [candidate], baseline=options["baseline"])
        except EvalRefused as refused:
            raise CommandError(refused.message) from None
        deadline = time.monotonic() + options["timeout"]
        shown = -1
        while eval_run_refresh(eval_run).status != EvalRun.Status.FINISHED:
            done, total = eval_run_progress(eval_run)
            if done != shown:
                self.stderr.write(f"Eval run {eval_run.pk}: {done}/{total} replayed")
                shown = done
            if time.monotonic() > deadline:
                raise CommandError(f"Eval run {eval_run.pk} did not finish in {options['timeout']:g} s ({done}/"
                                   f"{total} replayed); it goes on on the workers. Are they running?")
            time.sleep(0.25)
        report = eval_report(eval_run)
        self.stdout.write(json.dumps(report, indent=2, default=str) if options["json"] else report_table(report))
        regressions = len(report["regressions"])
        if regressions:
            raise CommandError(f"{regressions} case{'' if regressions == 1 else 's'} passed in the baseline and "
                               "failed now.")

    def _set(self, name: str) -> EvalSet:
        try:
            return set_named(name)
        except EvalSet.DoesNotExist:
            raise CommandError(f"No eval set {name!r}; `assistant_eval list` shows the sets.") from None

    def _add(self, options: dict[str, Any]) -> None:
        runs = AgentRun.objects.in_bulk(options["run_ids"])
        missing = [run_id for run_id in options["run_ids"] if run_id not in runs]
        if missing:
            raise CommandError(f"No run {', '.join(map(str, missing))}; nothing was added.")
        try:
            eval_set = set_named(options["set"], create=True)
        except CaseRefused as refused:
            raise CommandError(refused.message) from None
        problems = []
        for run_id in options["run_ids"]:
            try:
                case, made = case_add(eval_set, runs[run_id])
            except CaseRefused as refused:
                problems.append(refused.message)
                continue
            calls = len(tool_calls_of(case.recording))
            self.stdout.write(f"{'Added' if made else 'Already in the set:'} run {run_id} as case {case.pk} "
                              f"({calls} tool call{'' if calls == 1 else 's'}): {case.question[:70]}")
        if problems:
            raise CommandError("\n".join(problems))

    def _propose(self, options: dict[str, Any]) -> None:
        runs = list(proposed_runs(days=options["days"])[:200])
        if not runs:
            self.stdout.write(f"No run of the last {options['days']} days was rated thumbs down or failed.")
        for run in runs:
            self.stdout.write(f"{run.pk}\t{proposal_reason(run)}\t{run.spec}\t{run.created_at:%Y-%m-%d %H:%M}\t"
                              f"{(run.error or run.reply)[:60]}")

    def _list(self, options: dict[str, Any]) -> None:
        if options["set"] is None:
            for eval_set in EvalSet.objects.order_by("name"):
                self.stdout.write(f"{eval_set.name}\t{eval_set.cases.count()} cases\t{eval_set.description[:60]}")
            return
        for case in self._set(options["set"]).cases.order_by("id"):
            self.stdout.write(f"{case.pk}\trun {case.source_run_number}\t{case.spec}\t{case.owner_username}\t"
                              f"{case.question[:60]}")

    def _export(self, options: dict[str, Any]) -> None:
        text = json.dumps(set_export(self._set(options["set"])), indent=2, ensure_ascii=False)
        if options["out"] == "-":
            self.stdout.write(text)
        else:
            with open(options["out"], "w", encoding="utf-8") as file:
                file.write(text + "\n")

    def _import(self, options: dict[str, Any]) -> None:
        try:
            if options["file"] == "-":
                data = json.load(sys.stdin)
            else:
                with open(options["file"], encoding="utf-8") as file:
                    data = json.load(file)
        except (OSError, ValueError) as problem:
            raise CommandError(f"Cannot read {options['file']}: {problem}") from None
        try:
            eval_set, added = set_import(data, replace=options["replace"])
        except (BadExport, CaseRefused) as problem:
            raise CommandError(f"Not imported: {problem}") from None
        self.stdout.write(f"Imported {added} case{'' if added == 1 else 's'} into {eval_set.name} "
                          f"({eval_set.cases.count()} in all).")
