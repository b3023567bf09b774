"""A test-only task: what a worker's pool process has loaded before it runs any turn."""

from __future__ import annotations

import os
import sys

from celery import shared_task


@shared_task(name="testapp.process_state")
def process_state() -> dict[str, object]:
    """Which provider SDKs this pool process has imported, and whether the local embedder's weights are in
    memory. Read before the first turn, it tells what that turn would have to load."""
    minilm = sys.modules.get("assistant.embeddings.minilm")
    return {
        "pid": os.getpid(),
        "anthropic": "anthropic" in sys.modules,
        "openai": "openai" in sys.modules,
        "turn_modules": "assistant.turn.loop" in sys.modules,
        "twisted": "twisted" in sys.modules,
        "local_embedder_loaded": minilm is not None and getattr(minilm, "_model", None) is not None,
    }
