"""Where a chat's and a run's work was asked from — its channel — and what the core does differently for it.

A channel is a policy: the value stored in `AgentChat.channel` and `AgentRun.channel`, and the few facts the core
asks of it (whether the person sees its chats, whether its runs are filed in the person's profile, how long its
approvals wait, how a card of it is answered, what staff read of it). The core registers its own channel, the
person's panel (`PANEL`); an optional sub-app registers its own in its `AppConfig.ready()` (the person's own agent
over MCP: assistant/mcp/; an eval's replays: assistant/evals/), so the core names none of them. A value no
installed app registers is looked up as the panel's, but for the person's reads, which show only the channels
registered as theirs (`shown_to_person_values`): a record an app that is gone made is staff's.

This module sits under the models (they ask it which channels a person sees) and imports nothing of the
assistant: every room may ask it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from assistant.models import AgentRun, AgentStep

#: The longest stored value: the `channel` columns' max_length.
MAX_VALUE_CHARS = 16


class RecordedAnswers(Protocol):
    """The answers a run's tool calls get instead of running (an eval's replay: from its recording)."""

    def answer(self, name: str, arguments: Any) -> dict[str, Any]:
        """The outcome of calling tool `name` with `arguments` (as stored): a step's result."""
        ...


def _said_by_value(run: AgentRun) -> str:
    return run.channel


@dataclass(frozen=True)
class ChannelPolicy:
    """One channel: its stored value, and what the core does differently for its chats and runs."""

    #: Stored in `AgentChat.channel` and `AgentRun.channel`: never changed once rows hold it.
    value: str
    #: Staff's words for it: the admin's filter, the chat list's column, the run's field.
    label: str
    #: What the run page says it was asked from (its "Asked from"): `(run) -> text or safe HTML`.
    asked_from: Callable[[AgentRun], str]
    #: The run list's "via" column, when it says more than the value: `(run) -> text or safe HTML`.
    via: Callable[[AgentRun], str] = _said_by_value
    #: What the run page says above its timeline (an eval's replay: what it replays), `(run) -> safe HTML or ""`.
    banner: Callable[[AgentRun], str] | None = None
    #: The dashboard's choice of this channel (None: not offered), and what it then says its runs are.
    dashboard_choice: str | None = None
    dashboard_runs: str = ""
    #: Where all channels are shown, the dashboard counts this channel's runs among them, in these words.
    dashboard_share: str | None = None
    #: Whether the person sees its chats, their messages, runs and steps, and is told of them on their sockets
    #: (an eval's replay is staff's experiment: never).
    shown_to_person: bool = True
    #: Whether an ended run is filed in its owner's profile (the registry); one that is not announces its top
    #: run's end instead (`assistant.runs.lifecycle.run_ended`), for the app that made it.
    filed_in_profile: bool = True
    #: How long a run of it may wait for an approval before it ends as expired, in seconds, read when the
    #: sweeper asks; None: as long as it takes (the panel's: the person answers when they come back). What the
    #: expired run then says to its person.
    approval_seconds: Callable[[], float] | None = None
    approval_expired: str = "The approval was not taken up in time; the action was not taken."
    #: How the person's answer to a card of it is taken, `(run, step, approve, comment)`, the run locked; None:
    #: the panel's way (the step is answered and the run goes back to a worker). It raises what refuses it.
    answer_card: Callable[[AgentRun, AgentStep, bool, str], None] | None = None
    #: What answers a run's tool calls instead of running them, `(its settings, the calls already answered as
    #: (name, arguments)) -> RecordedAnswers | None`: None where its calls run (every channel's but a replay's).
    recorded_answers: Callable[[dict[str, Any], list[tuple[str, Any]]], RecordedAnswers | None] | None = None
    #: The settings a member asked by one of its runs takes from its asker beside its own, `(the asker's
    #: settings, the member's spec, its task) -> dict` (a replay's member replays too).
    member_settings: Callable[[dict[str, Any], str, str], dict[str, Any]] | None = None
    #: Whether its top runs that failed or were rated thumbs down are proposed as eval cases (the evals app's
    #: `assistant_eval propose`): a call of the person's own agent (MCP) is not, it holds no question of the
    #: person's for a replay to ask again; nor is an eval's replay, whose failure is its case's result.
    proposed_as_eval_case: bool = True

    def __post_init__(self) -> None:
        if not self.value or len(self.value) > MAX_VALUE_CHARS:
            raise ValueError(f"A channel's value is 1 to {MAX_VALUE_CHARS} characters: {self.value!r}.")


PANEL = ChannelPolicy(
    value="panel", label="Panel", asked_from=lambda run: "the panel",
    dashboard_choice="Panel", dashboard_runs="from the panel",
)

_POLICIES: dict[str, ChannelPolicy] = {PANEL.value: PANEL}


def register_channel(policy: ChannelPolicy) -> ChannelPolicy:
    """Make `policy` the channel of its value (called from an app's `ready()`; again with the same policy, as
    a second set-up in one process does, it changes nothing). Another policy for a value already registered is
    refused: two apps would store the same value for different things."""
    known = _POLICIES.get(policy.value)
    if known is not None and known != policy:
        raise ValueError(f"The channel {policy.value!r} is registered already ({known.label}).")
    _POLICIES[policy.value] = policy
    return policy


def channel_policy(value: str) -> ChannelPolicy:
    """The policy of the channel stored as `value`; the panel's for a value no installed app registers."""
    return _POLICIES.get(value, PANEL)


def channel_policies() -> list[ChannelPolicy]:
    """Every registered channel, the panel's first, then in the order the apps registered theirs."""
    return list(_POLICIES.values())


def channel_choices() -> list[tuple[str, str]]:
    """The `channel` fields' choices: every registered channel, in staff's words."""
    return [(policy.value, policy.label) for policy in _POLICIES.values()]


def shown_to_person_values() -> list[str]:
    """The channels whose chats and runs their person sees (`for_user`)."""
    return [policy.value for policy in _POLICIES.values() if policy.shown_to_person]
