"""Sentence embeddings for the assistant's memory, chosen by ASSISTANT["EMBEDDER"].

    from assistant.embeddings import get_embedder, EmbeddingError

    embedder = get_embedder()            # `local` unless configured otherwise
    vectors = embedder.embed(["text"])   # unit vectors, embedder.dims floats each
    embedder.name                        # stored beside the vectors, e.g. "local:all-MiniLM-L6-v2"

Nothing here imports Django at import time, so `assistant.embeddings.minilm` (the NumPy model)
works in any environment with NumPy, tokenizers and safetensors.
"""

from __future__ import annotations

from assistant.embeddings.base import Embedder, EmbeddingError
from assistant.embeddings.factory import get_embedder

__all__ = ["Embedder", "EmbeddingError", "get_embedder"]
