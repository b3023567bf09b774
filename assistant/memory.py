"""What the assistant remembers across conversations, per owner and spec (the seed's agent memory).

Recall ranks the owner's memories of the same embedding length by cosine distance to the embedding of
the last user turn; an exact per-owner scan, which at a few hundred rows per owner is sub-millisecond
and needs no approximate index. A failing embedder means "recall nothing", never a failed turn.
"""

from __future__ import annotations

from typing import Any

from pgvector.django import CosineDistance

from assistant.embeddings import Embedder
from assistant.models import AgentMemory


def memory_recall(*, owner: Any, spec: str, vector: list[float], limit: int) -> list[str]:
    """The contents of the owner's `limit` memories closest to `vector` (an embedding of what was asked)."""
    if limit <= 0 or not vector:
        return []
    rows = (
        AgentMemory.objects.filter(owner=owner, spec=spec, dims=len(vector))
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "-id")
        .values_list("content", flat=True)[:limit]
    )
    return list(rows)


def memory_remember(*, owner: Any, spec: str, content: str, vector: list[float], embedder: Embedder) -> AgentMemory:
    """Store one exchange under `vector`, the embedding of what was asked: a later question is matched
    against earlier questions, which is what recall compares, and the turn embeds only once."""
    return AgentMemory.objects.create(owner=owner, spec=spec, content=content, embedding=vector, embedder=embedder.name)
