"""The site's URLconf and, beside it, the smallest django-mcpz server there is: one tool that takes nothing
and answers a constant, with no authentication. What an MCP call costs a Django site before any work of
its own: daphne, the site's middleware, the JSON-RPC and MCP handling, and the client's side."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import path
from django_mcpz.server import MCPServer, public

from config.urls import urlpatterns as site_urlpatterns

BASELINE_PATH = "bench/mcp-baseline/"
BASELINE_TOOL = "ping"

baseline = MCPServer(name="bench-baseline", version="1", auth=public)


@baseline.tool(name=BASELINE_TOOL, description="Answer at once; it reads and writes nothing.", read_only=True,
               input_schema={"type": "object", "properties": {}, "additionalProperties": False})
def ping(request: HttpRequest, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"pong": True}


urlpatterns = [path(BASELINE_PATH, baseline, name="bench_mcp_baseline"), *site_urlpatterns]
