"""The channel `eval`: an eval's replay of a recorded run (assistant/evals/replays.py) is a run of it, in a chat
of its own. Its person never sees it and it is filed in nobody's profile: it is staff's experiment. What the
core does differently for it is said here, and registered when the app is ready (assistant/channel_policies.py)."""

from __future__ import annotations

import contextlib
from typing import Any

from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse

from assistant.channel_policies import ChannelPolicy
from assistant.evals.models import EvalCase
from assistant.evals.replay import member_settings, recorded_answers
from assistant.models import AgentRun


def replay_banner_facts(run: AgentRun) -> dict[str, Any] | None:
    """What a replay's page says it is: the eval run, case and set it replays, with links to the eval run and
    the recorded run. From the run's own `config["replay"]` ids; a case or run deleted since is said by its id."""
    replay = run.config.get("replay") if isinstance(run.config, dict) else None
    if not isinstance(replay, dict):
        return None
    case_id, eval_run_id = replay.get("case"), replay.get("eval_run")
    banner: dict[str, Any] = {"case": case_id, "eval_run": eval_run_id, "eval_set": None, "eval_run_url": None,
                              "recorded_run": None, "recorded_url": None}
    if isinstance(case_id, int):
        case = EvalCase._default_manager.filter(pk=case_id).select_related("eval_set").first()
        if case is not None:
            banner["eval_set"] = case.eval_set.name
            banner["recorded_run"] = case.source_run_id or case.source_run_number
            if case.source_run_id is not None:
                banner["recorded_url"] = reverse("admin:assistant_agentrun_change", args=[case.source_run_id])
    if isinstance(eval_run_id, int):
        with contextlib.suppress(NoReverseMatch):  # a site whose admin leaves the eval runs out links none
            banner["eval_run_url"] = reverse("admin:assistant_evals_evalrun_change", args=[eval_run_id])
    return banner


def replay_banner(run: AgentRun) -> str:
    banner = replay_banner_facts(run)
    return render_to_string("admin/assistant_evals/replay_banner.html", {"banner": banner}) if banner else ""


EVAL = ChannelPolicy(
    value="eval",
    label="Eval replay",
    asked_from=lambda run: "an eval's replay (staff's; its person never sees it)",
    banner=replay_banner,
    shown_to_person=False,
    filed_in_profile=False,
    recorded_answers=recorded_answers,
    member_settings=member_settings,
    # A replay that fails is a case's result, already shown on its eval run: not a new question to make a case of.
    proposed_as_eval_case=False,
)
