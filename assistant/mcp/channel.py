"""The channel `mcp`: each call of the person's own agent is a run of it, in the chat of the token that made it
(assistant/mcp/calls.py). What the core does differently for it is said here, and registered when the app is
ready (assistant/channel_policies.py)."""

from __future__ import annotations

import contextlib

from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from assistant.channel_policies import ChannelPolicy
from assistant.conversation.services import Refused
from assistant.mcp.agent_calls import agent_call_answer
from assistant.mcp.conf import mcp_settings
from assistant.models import AgentRun, AgentStep


def asked_from(run: AgentRun) -> str:
    """The run page's "Asked from": the token it was called with, linked to the token's page."""
    name = run.client_name or "unnamed"
    token_url = None
    if run.client_token_id:
        with contextlib.suppress(NoReverseMatch):  # the tokens' admin is not there where the admin is not
            token_url = reverse("admin:assistant_mcp_accesstoken_change", args=[run.client_token_id])
    token = format_html('<a href="{}">“{}”</a>', token_url, name) if token_url else format_html("“{}”", name)
    return format_html("via MCP — token {} (the person's own agent called the tool; no model of this site took part)",
                       token)


def via(run: AgentRun) -> str:
    """The run list's "via": "MCP" with the name of the access token the person's own agent called with."""
    return format_html("MCP<br>“{}”", run.client_name) if run.client_name else "MCP"


def answer_card(run: AgentRun, step: AgentStep, approve: bool, comment: str) -> None:
    """The person answered their agent's call in the panel. The agent that asked is not a worker of this site:
    an approval waits for its next call of the same tool with the same arguments, which runs it once; a no ends
    the call's run here."""
    if comment:
        raise Refused("bad_request", "A comment answers a plan; this is your agent's call: approve or decline it.")
    agent_call_answer(run, step, approve=approve)


def approval_seconds() -> float:
    """An approval is for the call it was asked about: an agent that has not called again within this has
    moved on (see `assistant.turn.sweeper`)."""
    return float(mcp_settings.MCP_APPROVAL_SECONDS)


MCP = ChannelPolicy(
    value="mcp",
    label="MCP (the person's own agent)",
    asked_from=asked_from,
    via=via,
    dashboard_choice="MCP (people's own agents)",
    dashboard_runs="of people's own agents (MCP)",
    dashboard_share="people's own agents' calls (MCP)",
    approval_seconds=approval_seconds,
    approval_expired="Your agent did not call it again in time; the action was not taken.",
    answer_card=answer_card,
    proposed_as_eval_case=False,
)
