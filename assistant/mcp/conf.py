"""The MCP sub-app's settings: keys of the same `ASSISTANT = {...}` dict as the core's, with defaults of their own,
read through `mcp_settings` (known to the core's check of the dict where this app is installed: apps.py)."""

from __future__ import annotations

from typing import Any

from assistant.conf import AppSettings

DEFAULTS: dict[str, Any] = {
    # The person's own agent over MCP: tool calls one access token may make per minute, and how long an approval
    # waits for the agent's call (the person's answer in the panel, or the client's elicitation answer) before it
    # is asked again.
    "MCP_CALLS_PER_MINUTE": 60,
    "MCP_APPROVAL_SECONDS": 600,
    # For a token made with containment: how long after a call returned someone else's text its writes wait for
    # the person.
    "MCP_CONTAINMENT_SECONDS": 1800,
    # Hosted agents connecting through OAuth (oauth.py): the dynamic client registrations one client address may
    # make in an hour (anyone may register, signed out, and each stores a client).
    "MCP_OAUTH_REGISTRATIONS_PER_HOUR": 20,
}

mcp_settings = AppSettings(DEFAULTS)
