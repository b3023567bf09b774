"""The site's own settings with two changes for the `mcp` benchmark: its URLconf (the site's, plus the
baseline server) and no practical per-token call limit (the limit's query still runs on every call)."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.mcp_site.urls"
ASSISTANT = {**ASSISTANT, "MCP_CALLS_PER_MINUTE": 1_000_000}  # noqa: F405
