"""The assistant for the person's own agent (Claude, Cursor, ChatGPT...) over MCP: an optional sub-app.

A host adds `"assistant.mcp"` to `INSTALLED_APPS` (after `"assistant"`); its pages come with the assistant's
own `include("assistant.urls")`. What exists now is *who is calling*: per-person access tokens
(`assistant.mcp.tokens`), the `assistant_token` command, the person's page and the admin. The MCP endpoint
that accepts the tokens is being built.
"""
