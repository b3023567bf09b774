"""The site as the `mcp` benchmark serves it: the real site, plus one trivial django-mcpz server beside the
assistant's endpoint (the baseline), and the per-token call limit lifted so that a benchmark's hundreds of
calls a minute are all answered. Used only by `benchmarks/bench_mcp.py`."""
