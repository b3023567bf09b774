"""The assistant for the person's own agent (Claude Code, Claude Desktop, Cursor...) over MCP: an optional sub-app.

A host installs the `mcp` extra (django-mcpz) and adds `"assistant.mcp"` to `INSTALLED_APPS` (after
`"assistant"`), and includes its URLs in the assistant's own include (`urls.py`, assistant/urls.py's
`assistant_urls`); the rest it registers with the core when it is ready (`apps.py`: its channel, its settings'
keys, its token checks), so the core imports nothing of it. The agent
calls `POST /assistant/mcp/` (`assistant.mcp.server`) with one of the person's access tokens
(`assistant.mcp.tokens`, made on the person's page, by the `assistant_token` command, listed in the admin),
is offered exactly the token's tools, and each call is a run of the person's (`assistant.mcp.calls`).
docs/agents.md says how to connect a client and what differs from the panel.
"""
