"""Eval sets made from recorded runs: a case is what a run was asked and did, kept whole; and sets travel as JSON.

`case_add(eval_set, run)` snapshots one top run: its question (the person's message), the conversation before
it, its spec and person, its steps — each model call's tokens, each tool call with its arguments, outcome and
the person's answer, and for a member it asked, that member's run as its own recording under the step — and
its reply. By default a case expects what its recording did: the same tool calls in order with matching
arguments, and an answer (`default_expectations`).

A set's JSON (`set_export` / `set_import`) is the cases as they are kept, so an export imported anywhere
replays the same; people are named by username, runs by their number on the site they were recorded on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from assistant.channel_policies import channel_policies
from assistant.evals.models import NAME_MAX, EvalCase, EvalSet
from assistant.live.threads import thread_until_question
from assistant.models import AgentMessage, AgentRun, AgentStep
from assistant.plans.offer import PLAN_TOOL
from assistant.society.offer import DELEGATION_PREFIX

#: The export's format: a reader refuses one it does not know rather than guess.
FORMAT = "assistant-eval-set/1"
#: The conversation a case keeps before its question, at most (as a turn keeps KEEP_MESSAGES).
CONVERSATION_MAX = 40
#: How far back proposals look, by default.
PROPOSE_DAYS = 30


class CaseRefused(Exception):
    """This run cannot be a case (still active, a member's run, not the person's question); `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadExport(ValueError):
    """A set's JSON that cannot be imported; the message says what is wrong, and nothing was stored."""


def _step(step: AgentStep, members: dict[int, AgentRun]) -> dict[str, Any]:
    entry: dict[str, Any] = {"seq": step.seq, "kind": step.kind}
    if step.kind == AgentStep.Kind.TOOL_CALL:
        entry.update(tool=step.tool_name, arguments=step.arguments, result=step.result,
                     took_effect=step.took_effect, confirmation=step.confirmation)
        if step.asked_arguments is not None:
            entry["asked_arguments"] = step.asked_arguments  # the person approved it with changes
        asked = (step.result or {}).get("child_run_id")
        if isinstance(asked, int) and asked in members:
            entry["member_run"] = _recording(members[asked], members)
    elif step.kind == AgentStep.Kind.MODEL_CALL:
        entry.update(prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens)
    else:
        entry["reason"] = step.reason
    if step.duration_ms is not None:
        entry["duration_ms"] = step.duration_ms
    return entry


def _recording(run: AgentRun, members: dict[int, AgentRun]) -> dict[str, Any]:
    steps = [_step(step, members) for step in run.steps.order_by("seq")]
    recorded = {
        "spec": run.spec, "model": run.model, "status": run.status, "stop_reason": run.stop_reason,
        "reply": run.reply, "error": run.error, "steps": steps,
        "usage": {"prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens,
                  "total_tokens": run.total_tokens},
        "model_calls": run.model_calls, "tool_calls": run.tool_calls, "tool_errors": run.tool_errors,
        "duration_ms": run.duration_ms,
    }
    if run.parent_id is not None:
        recorded["task"] = run.task
    page = (run.config or {}).get("page")
    if page:  # what the page showed then: a replay is told the same, never reads the page again
        recorded["page"] = page
    return recorded


def recording_of(run: AgentRun) -> dict[str, Any]:
    """What `run` did, with the runs of the members it asked nested under the steps that asked them."""
    members = {member.pk: member for member in AgentRun.objects.filter(root=run)}
    return _recording(run, members)


def tool_calls_of(recording: dict[str, Any], *, member: str = "") -> list[dict[str, Any]]:
    """The recording's tool calls, in order, its tree's included: each member's calls right after the step
    that asked it, marked with the member (`"member": spec`). The planning tool is left out (a plan is how
    the run went about it, not what it did), and the asking itself is expected by the member alone: the
    words of a task are the model's own each time."""
    calls: list[dict[str, Any]] = []
    for step in recording.get("steps", []):
        if step.get("kind") != AgentStep.Kind.TOOL_CALL or step.get("tool") == PLAN_TOOL:
            continue
        asked_member = str(step.get("tool", "")).startswith(DELEGATION_PREFIX)
        call: dict[str, Any] = {"tool": step["tool"]} if asked_member else {"tool": step["tool"],
                                                                             "arguments": step.get("arguments") or {}}
        if member:
            call["member"] = member
        calls.append(call)
        below = step.get("member_run")
        if isinstance(below, dict):
            calls.extend(tool_calls_of(below, member=str(below.get("spec") or "")))
    return calls


def default_expectations(recording: dict[str, Any]) -> dict[str, Any]:
    """What a replay is expected to do unless staff say otherwise: the recording's own tool calls, in order,
    with matching arguments, and an answer."""
    return {"trajectory": {"mode": "in_order", "calls": tool_calls_of(recording)}, "arguments": "match",
            "reply": {"nonempty": True}}


def _asked(run: AgentRun) -> tuple[AgentMessage, list[dict[str, str]]]:
    """The person's message `run` answers, and the conversation before it on its branch (the newest
    CONVERSATION_MAX messages): an edited question's case is what was asked on its own branch."""
    branch = thread_until_question(run)
    if not branch:
        raise CaseRefused(f"Run {run.pk} has no question of its person's to replay (it was not asked from a chat).")
    *before, question = branch
    return question, [{"role": message.role, "content": message.content} for message in before[-CONVERSATION_MAX:]]


def case_add(eval_set: EvalSet, run: AgentRun, *, reason: str = "") -> tuple[EvalCase, bool]:
    """`run` as a case of `eval_set`: (the case, whether it was made now). A run already in the set is
    its case as it is. Refused (CaseRefused) for a run still at work or a member's run."""
    if run.is_active:
        raise CaseRefused(f"Run {run.pk} is still {run.get_status_display().lower()}: add it once it has ended.")
    if run.parent_id is not None:
        raise CaseRefused(f"Run {run.pk} is a member's run: add its top run #{run.root_id}, whose case keeps it.")
    existing = EvalCase.objects.filter(eval_set=eval_set, source_run_number=run.pk).first()
    if existing is not None:
        return existing, False
    question, conversation = _asked(run)
    recording = recording_of(run)
    owner = run.owner
    try:
        with transaction.atomic():
            case = EvalCase.objects.create(
                eval_set=eval_set, source_run=run, source_run_number=run.pk, owner=owner,
                owner_username=owner.get_username(), spec=run.routed_from or run.spec, question=question.content,
                conversation=conversation, recording=recording,
                expectations=default_expectations(recording), reason=reason,
            )
    except IntegrityError:  # added at the same moment by another request
        return EvalCase.objects.get(eval_set=eval_set, source_run_number=run.pk), False
    return case, True


def set_named(name: str, *, create: bool = False, by: Any = None) -> EvalSet:
    """The set of that name; made when `create` (EvalSet.DoesNotExist otherwise)."""
    clean = (name or "").strip()
    if create:
        if not clean or len(clean) > NAME_MAX or not all(c.isascii() and (c.isalnum() or c in "-_") for c in clean):
            raise CaseRefused(f"A set's name is 1–{NAME_MAX} letters, digits, '-' and '_', not {name!r}.")
        return EvalSet.objects.get_or_create(name=clean, defaults={"created_by": by})[0]
    return EvalSet.objects.get(name=clean)


def proposed_runs(*, days: int = PROPOSE_DAYS) -> QuerySet[AgentRun]:
    """Top runs worth a case: the person rated the answer thumbs down, or the run failed (newest first); none of a
    channel whose policy proposes none of its runs (an agent's calls over MCP)."""
    since = timezone.now() - timedelta(days=days)
    not_proposed = [policy.value for policy in channel_policies() if not policy.proposed_as_eval_case]
    return (AgentRun.objects.filter(parent__isnull=True, created_at__gte=since)
            .filter(Q(quality_score=0.0) | Q(status__in=[AgentRun.Status.FAILED, AgentRun.Status.TIMED_OUT]))
            .exclude(channel__in=not_proposed).order_by("-created_at"))


def proposal_reason(run: AgentRun) -> str:
    return "thumbs_down" if run.quality_score == 0.0 else "failed"


# --- export and import --------------------------------------------------------------------------------

_CASE_FIELDS = ("spec", "question", "conversation", "recording", "expectations", "reason")


def set_export(eval_set: EvalSet) -> dict[str, Any]:
    """The set as JSON a repository keeps: its cases whole, people by username."""
    return {
        "format": FORMAT, "name": eval_set.name, "description": eval_set.description,
        "cases": [{"source_run": case.source_run_number, "person": case.owner_username,
                   **{name: getattr(case, name) for name in _CASE_FIELDS}}
                  for case in eval_set.cases.order_by("id")],
    }


def _text(value: Any, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()) or "\x00" in value:
        raise BadExport(f"{what} must be {'a' if empty else 'a non-empty'} string without NUL.")
    return value


def _imported_case(entry: Any, number: int) -> dict[str, Any]:
    where = f"case {number}"
    if not isinstance(entry, dict):
        raise BadExport(f"{where} is not an object.")
    recording, expectations = entry.get("recording"), entry.get("expectations", {})
    if not isinstance(recording, dict) or not isinstance(recording.get("steps"), list):
        raise BadExport(f"{where}: recording must be an object with a list of steps.")
    if not isinstance(expectations, dict):
        raise BadExport(f"{where}: expectations must be an object.")
    conversation = entry.get("conversation", [])
    if not isinstance(conversation, list) or not all(
        isinstance(item, dict) and item.get("role") in ("user", "assistant") and isinstance(item.get("content"), str)
        for item in conversation
    ):
        raise BadExport(f"{where}: conversation must be a list of {{role: user|assistant, content}}.")
    source = entry.get("source_run")
    if source is not None and (not isinstance(source, int) or isinstance(source, bool) or source < 1):
        raise BadExport(f"{where}: source_run must be a run's number or null.")
    username = _text(entry.get("person", ""), f"{where}: person", empty=True)
    owner = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first() \
        if username else None
    return {"source_run_number": source, "owner": owner, "owner_username": username,
            "spec": _text(entry.get("spec"), f"{where}: spec"), "question": _text(entry.get("question"),
                                                                                    f"{where}: question"),
            "conversation": conversation, "recording": recording, "expectations": expectations,
            "reason": _text(entry.get("reason", ""), f"{where}: reason", empty=True)[:40]}


@transaction.atomic
def set_import(data: Any, *, by: Any = None, replace: bool = False) -> tuple[EvalSet, int]:
    """A set from its JSON: (the set, how many cases were added). A set of that name takes the cases it does
    not have yet (by their run's number), or, with `replace`, exactly the export's. BadExport, storing
    nothing, for JSON that is not a set's."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadExport(f"Not an eval set's export (its \"format\" is not {FORMAT!r}).")
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise BadExport("\"cases\" must be a list.")
    eval_set = set_named(_text(data.get("name"), "name"), create=True, by=by)
    description = data.get("description", "")
    if isinstance(description, str) and description != eval_set.description:
        eval_set.description = description
        eval_set.save(update_fields=["description", "updated_at"])
    if replace:
        eval_set.cases.all().delete()
    known = set(eval_set.cases.exclude(source_run_number=None).values_list("source_run_number", flat=True))
    added = 0
    for number, entry in enumerate(cases, start=1):
        fields = _imported_case(entry, number)
        if fields["source_run_number"] is not None and fields["source_run_number"] in known:
            continue
        EvalCase.objects.create(eval_set=eval_set, **fields)
        known.add(fields["source_run_number"])
        added += 1
    return eval_set, added
