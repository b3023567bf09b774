"""The society: specs as members with one role each, their own tools, profile, model and limits, and the
members each may hand work to (`delegates`). See `members` for how a spec is read and checked."""

from __future__ import annotations

from assistant.society.members import (
    LIMIT_KEYS,
    SPEC_KEYS,
    Member,
    member,
    member_problems,
    members,
)
from assistant.society.offer import DelegationTool, delegation_tools

__all__ = ["LIMIT_KEYS", "SPEC_KEYS", "DelegationTool", "Member", "delegation_tools", "member", "member_problems",
           "members"]
