"""What every embedder offers, and the one error they raise. No Django, no third-party imports."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class EmbeddingError(Exception):
    """Embedding failed: the weights are missing, the server refused, the answer was malformed.

    The message is meant for a log line or an admin, so it says what failed and what to do.
    Callers that can live without vectors (memory recall) catch this and carry on.
    """


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed size.

    `name` is stored next to every vector (e.g. ``"local:all-MiniLM-L6-v2"``) so vectors from
    different embedders are never compared; `dims` is the vector length.
    """

    name: str

    @property
    def dims(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-normalised vector per text, in order; `[]` for `[]`. Raises EmbeddingError."""
        ...
