"""What a spec's model is offered to hand work over: one tool per member it may ask (`ask_<member>`), in the
order the registry ranks them for this person, each saying what the member is for and how it has done.

A member already on the path of the run asking (its parent, its parent's parent, …) is not offered: no spec
twice on one path. Nor is any member once the tree is `MAX_DELEGATION_DEPTH` deep. What a delegation may
then do is the member's own affair: its own tools under its own profile, never more than the person may.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from assistant.conf import assistant_settings
from assistant.society.members import Member, member
from assistant.tools.declarations import TOOL_NAME
from registry.selectors import RankedMember, members_ranked

#: A delegation tool is named for its member: `ask_reader`, `ask_clerk`.
DELEGATION_PREFIX = "ask_"
#: How much a model may write as a member's task (and as the context it passes along).
TASK_MAX_CHARS = 4_000
CONTEXT_MAX_CHARS = 8_000
#: The argument with which the asking model keeps a lone member's answer for itself (a handoff's way out).
RETURN_ANSWER = "return_answer"


@dataclass(frozen=True)
class DelegationTool:
    """Hands a task to `member` (a spec): a tool as the model sees it, and what it stands for."""

    name: str
    description: str
    parameters: dict[str, Any]
    member: str
    annotation: str  # the member's record for this person, in words (registry.selectors.members_ranked)
    ranked: RankedMember | None = field(default=None, compare=False)  # where the ranking put it, and why
    kind: str = "delegate"
    destructive: bool = False
    confirm: bool = False  # asking a member is not an action: the member's own actions ask first


def delegation_tool_name(spec_name: str) -> str:
    """`ask_<spec>`. A spec name that makes no valid tool name, or the name of a declared tool, is
    assistant.E035."""
    return f"{DELEGATION_PREFIX}{spec_name}"


def delegation_parameters(*, hands_over: bool = False) -> dict[str, Any]:
    """The arguments of an `ask_<member>` tool; `hands_over` when the asking spec lets a member asked alone
    answer the person itself (its `handoff`), which the model may decline for one call."""
    properties: dict[str, Any] = {
        "task": {"type": "string", "minLength": 1, "maxLength": TASK_MAX_CHARS,
                 "description": "What the member should do, in full: it sees nothing else of this conversation."},
        "context": {"type": "string", "maxLength": CONTEXT_MAX_CHARS,
                    "description": "Anything from the conversation the member needs to know (optional)."},
    }
    if hands_over:
        properties[RETURN_ANSWER] = {
            "type": "boolean",
            "description": ("true to have the member's answer back, to combine it with other members' answers or "
                            "act on it. Leave it out when the member's answer is the whole answer: it then "
                            "answers the person itself and you are done."),
        }
    return {"type": "object", "properties": properties, "required": ["task"], "additionalProperties": False}


def _description(seat: Member, annotation: str, *, hands_over: bool) -> str:
    role = seat.role or "A member of this assistant."
    answers = ("When you ask only this member, its answer is the reply to the person" if hands_over
               else "It answers you with what it did")
    return (f"Hand a task to the member “{seat.name}”: {role.rstrip('.')}. It works with its own tools. {answers}. "
            f"Its record: {annotation}.")


def delegation_tools(*, owner: Any, asking: str | Member, path: Iterable[str] = (), depth: int = 0,
                     intent: str | None = None, hands_over: bool | None = None,
                     only: Iterable[str] | None = None) -> list[DelegationTool]:
    """The delegation tools of the spec `asking` for `owner`, best-ranked first. `path` is the specs of the
    runs above this one (its parent's, …) and `depth` this run's depth in its tree: a member on the path,
    the asking spec itself and any member below the depth limit are not offered. `hands_over`: whether a
    member asked alone answers for the asker (default: the spec's `handoff`; a run passes its own setting).
    `only`: just these of its members (those routing weighs), ranked among themselves."""
    seat = asking if isinstance(asking, Member) else member(asking)
    if depth + 1 > int(assistant_settings.MAX_DELEGATION_DEPTH):
        return []
    above = {*path, seat.name}
    wanted = set(only) if only is not None else None
    candidates = [name for name in dict.fromkeys(seat.delegates)
                  if name not in above and (wanted is None or name in wanted)]
    if not candidates:
        return []
    hands_over = seat.handoff == "auto" if hands_over is None else hands_over
    if only is not None and len(candidates) == 1:
        # Routing's one member for the request: nothing to rank it against, so no record is read (and its tool is
        # shown to no model).
        return [_delegation_tool(member(candidates[0]), None, hands_over=hands_over)]
    return [_delegation_tool(member(ranked.spec_name), ranked, hands_over=hands_over)
            for ranked in members_ranked(owner=owner, spec_names=candidates, intent=intent)]


def _delegation_tool(delegate: Member, ranked: RankedMember | None, *, hands_over: bool) -> DelegationTool:
    annotation = ranked.annotation if ranked is not None else "not read"
    return DelegationTool(
        name=delegation_tool_name(delegate.name),
        description=_description(delegate, annotation, hands_over=hands_over),
        parameters=delegation_parameters(hands_over=hands_over), member=delegate.name,
        annotation=annotation, ranked=ranked,
    )


def is_valid_delegation_name(spec_name: str) -> bool:
    return bool(TOOL_NAME.match(delegation_tool_name(spec_name)))
