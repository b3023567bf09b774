"""What the assistant remembers across conversations, per owner and spec (the seed's agent memory).

Recall embeds the last user turn and ranks the owner's memories of the same embedding length by
cosine distance; an exact per-owner scan, which at a few hundred rows per owner is sub-millisecond
and needs no approximate index. A failing embedder means "recall nothing", never a failed turn.
"""

from __future__ import annotations

from typing import Any

from pgvector.django import CosineDistance

from assistant.embeddings import Embedder
from assistant.models import AgentMemory


def memory_recall(*, owner: Any, spec: str, text: str, embedder: Embedder, limit: int) -> list[str]:
    """The contents of the `limit` memories closest to `text`. Raises EmbeddingError when embedding fails."""
    if limit <= 0 or not text.strip():
        return []
    (vector,) = embedder.embed([text])
    rows = (
        AgentMemory.objects.filter(owner=owner, spec=spec, dims=len(vector))
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "-id")
        .values_list("content", flat=True)[:limit]
    )
    return list(rows)


def memory_remember(*, owner: Any, spec: str, content: str, embedder: Embedder) -> AgentMemory:
    """Store one exchange with its embedding. Raises EmbeddingError when embedding fails."""
    (vector,) = embedder.embed([content])
    return AgentMemory.objects.create(owner=owner, spec=spec, content=content, embedding=vector, embedder=embedder.name)
