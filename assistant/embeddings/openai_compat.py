"""The `openai:MODEL` embedder: OpenAI's embeddings endpoint, or any server that speaks it
(Ollama, vLLM, llama.cpp, LiteLLM, ...) through a base URL."""

from __future__ import annotations

import math
import threading
from typing import Any

from assistant.embeddings.base import EmbeddingError

# OpenAI's own models, so `dims` needs no request; other servers' models are probed once.
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# OpenAI accepts at most 2048 inputs per request; smaller requests also keep timeouts meaningful.
MAX_INPUTS_PER_REQUEST = 256


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible `/embeddings` endpoint, via the official SDK.

    `provider` is the ASSISTANT["PROVIDERS"] entry it came from and prefixes `name`.

    Vectors are re-normalised here because compatible servers do not all return unit vectors.
    """

    def __init__(
        self,
        model: str,
        *,
        provider: str = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not model:
            raise EmbeddingError(f"The {provider} embedder needs a model name: `{provider}:MODEL`.")
        self.model = model
        self.name = f"{provider}:{model}"
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._max_retries = max_retries
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._dims: int | None = KNOWN_DIMS.get(model)

    @property
    def dims(self) -> int:
        """The vector length; for a model we don't know, learnt from one embedding request."""
        if self._dims is None:
            self.embed(["dimension probe"])
        assert self._dims is not None  # set by embed() or it raised
        return self._dims

    def _get_client(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    import openai

                    self._client = openai.OpenAI(
                        # Local servers (Ollama, llama.cpp) need no key but the SDK insists on one;
                        # a server that does need it answers 401, which becomes a readable error.
                        api_key=self._api_key or "no-key-configured",
                        base_url=self._base_url or None,
                        timeout=self._timeout,
                        max_retries=self._max_retries,
                    )
        return self._client

    def prepare(self) -> None:
        """Import the SDK and build the client now, not inside the first `embed()`. No network call."""
        self._get_client()

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors for `texts`, in order. Raises EmbeddingError on any failure."""
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise TypeError("embed() takes a list of strings")
        vectors: list[list[float]] = []
        for start in range(0, len(texts), MAX_INPUTS_PER_REQUEST):
            vectors.extend(self._request(texts[start : start + MAX_INPUTS_PER_REQUEST]))
        return vectors

    def _request(self, texts: list[str]) -> list[list[float]]:
        import openai

        # The OpenAI API rejects empty strings; a lone space embeds "nothing" just as well.
        inputs = [text if text.strip() else " " for text in texts]
        where = self._base_url or "the OpenAI API"
        try:
            response = self._get_client().embeddings.create(
                model=self.model, input=inputs, encoding_format="float"
            )
        except openai.APIStatusError as exc:
            raise EmbeddingError(
                f"Embedding with {self.name} at {where} failed: HTTP {exc.status_code}: {_brief(exc)}"
                + (" (check the openai provider's api_key)" if exc.status_code in (401, 403) else "")
            ) from exc
        except openai.APIError as exc:  # connection refused, timeout, unreadable answer
            raise EmbeddingError(f"Embedding with {self.name} at {where} failed: {_brief(exc)}") from exc

        items = sorted(getattr(response, "data", None) or [], key=lambda item: item.index)
        if len(items) != len(inputs):
            raise EmbeddingError(
                f"{self.name} at {where} returned {len(items)} embeddings for {len(inputs)} texts"
            )
        vectors = [_unit(item.embedding, self.name) for item in items]
        sizes = {len(vector) for vector in vectors}
        expected = self._dims
        if len(sizes) != 1 or (expected is not None and sizes != {expected}):
            raise EmbeddingError(
                f"{self.name} at {where} returned vectors of length {sorted(sizes)}, expected {expected}"
            )
        self._dims = sizes.pop()
        return vectors


def _brief(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


def _unit(values: Any, name: str) -> list[float]:
    if not isinstance(values, list) or not values:
        raise EmbeddingError(f"{name} returned an embedding that is not a list of numbers")
    try:
        floats = [float(v) for v in values]
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{name} returned an embedding that is not a list of numbers") from exc
    norm = math.sqrt(math.fsum(v * v for v in floats))
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbeddingError(f"{name} returned a zero or non-finite embedding, which has no direction")
    return [v / norm for v in floats]
