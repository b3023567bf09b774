"""What the assistant remembers across conversations, per owner and spec (the seed's agent memory).

Recall ranks the owner's memories made by the same embedder (same name, same vector length) by cosine
distance to the embedding of the last user turn; an exact per-owner scan, which at a few hundred rows per
owner is sub-millisecond and needs no approximate index. Vectors of two embedders are never compared,
even of the same length: their spaces have nothing in common. A failing embedder means "recall
nothing", never a failed turn.

A memory is what the person asked and what the assistant answered, never a tool's raw output; it is
recalled as data (see assistant.turn.context), never into the system prompt.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from pgvector.django import CosineDistance

from assistant.embeddings import Embedder
from assistant.models import AgentMemory


def memory_recall(*, owner: Any, spec: str, vector: list[float], embedder: str, limit: int) -> list[str]:
    """The contents of the owner's `limit` memories closest to `vector` (an embedding of what was asked by
    the embedder named `embedder`), among those that embedder made."""
    if limit <= 0 or not vector or not embedder:
        return []
    rows = (
        AgentMemory.objects.filter(owner=owner, spec=spec, embedder=embedder, dims=len(vector))
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "-id")
        .values_list("content", flat=True)[:limit]
    )
    return list(rows)


def memory_remember(*, owner: Any, spec: str, content: str, vector: list[float], embedder: Embedder) -> AgentMemory:
    """Store one exchange under `vector`, the embedding of what was asked: a later question is matched
    against earlier questions, which is what recall compares, and the turn embeds only once."""
    return AgentMemory.objects.create(owner=owner, spec=spec, content=content, embedding=vector, embedder=embedder.name)


# --- the person's own view of their memories (the memories page) ---------------------------------------


def memories_list(*, owner: Any, query: str = "") -> QuerySet[AgentMemory]:
    """The owner's memories, newest first; with `query`, only those whose content contains it (ignoring
    case). Nobody else's rows are ever in it."""
    memories = AgentMemory.objects.filter(owner=owner).only("id", "spec", "content", "created_at")
    if query:
        memories = memories.filter(content__icontains=query)
    return memories.order_by("-created_at", "-id")


class MemoryNotFound(Exception):
    """No such memory of this owner: another person's and a missing one are indistinguishable on purpose."""


@transaction.atomic
def memory_delete(*, owner: Any, memory_id: Any) -> AgentMemory:
    """Forget one of the owner's memories; returns it as it was (for the message that says what went)."""
    try:
        memory = AgentMemory.objects.select_for_update().get(owner=owner, pk=int(memory_id))
    except (AgentMemory.DoesNotExist, TypeError, ValueError):
        raise MemoryNotFound(f"No memory {memory_id!r}.") from None
    memory.delete()
    return memory


@transaction.atomic
def memories_clear(*, owner: Any) -> int:
    """Forget everything the assistant remembers of the owner, under every spec; returns how many went."""
    _, per_model = AgentMemory.objects.filter(owner=owner).delete()
    return per_model.get(AgentMemory._meta.label, 0)
