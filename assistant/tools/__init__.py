"""Assistant tools: the app's own views and model reads, fired as the signed-in user.

Declare with `@tool(...)` on a view or `readable(Model, fields=..., scope=...)` in an app's
`assistant_tools.py`, and who writes a model's text with `authored(Model, by=...)`;
offer with `tools_for(user, spec)`; run with `execute_tool(user, name, args)`.
"""

from __future__ import annotations

from assistant.tools.declarations import ReadTool, ViewTool, readable, tool
from assistant.tools.executor import execute_tool
from assistant.tools.offer import PROFILES, PermissionProfile, Tool, ToolScope, resolve_scope, tool_for, tools_for
from assistant.tools.outcome import STATUSES, ToolOutcome
from assistant.tools.provenance import authored
from assistant.tools.registry import (
    AlreadyRegistered,
    NotRegistered,
    autodiscover,
    register_temporarily,
    registry,
)
from assistant.tools.shows import shows

__all__ = [
    "PROFILES",
    "STATUSES",
    "AlreadyRegistered",
    "NotRegistered",
    "PermissionProfile",
    "ReadTool",
    "Tool",
    "ToolOutcome",
    "ToolScope",
    "ViewTool",
    "authored",
    "autodiscover",
    "execute_tool",
    "readable",
    "register_temporarily",
    "registry",
    "resolve_scope",
    "shows",
    "tool",
    "tool_for",
    "tools_for",
]
