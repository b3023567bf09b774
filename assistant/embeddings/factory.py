"""`get_embedder()`: the embedder named by the ASSISTANT["EMBEDDER"] setting."""

from __future__ import annotations

from typing import Any

from assistant.embeddings.base import Embedder, EmbeddingError
from assistant.embeddings.openai_compat import OpenAIEmbedder

SPEC_HELP = (
    "Use `local` (the packaged all-MiniLM-L6-v2), `openai:MODEL` (any compatible endpoint) or "
    "`NAME:MODEL` with NAME an ASSISTANT['PROVIDERS'] entry of kind openai."
)


def get_embedder(spec: str | None = None) -> Embedder:
    """The embedder for `spec`, or for ASSISTANT["EMBEDDER"] (default `local`) when it is None.

    `local` and `local:all-MiniLM-L6-v2` (the name stored beside its vectors) are the NumPy MiniLM,
    whose weights load on the first `embed()` call, once per process. `openai:MODEL` uses the
    `openai` entry of ASSISTANT["PROVIDERS"] for `api_key` and `base_url`; `NAME:MODEL` does the same
    with the entry NAME when its `kind` is `openai`. Building an embedder makes no network call.
    An unknown spec raises EmbeddingError.
    """
    # Django may be absent: importing the NumPy model (assistant.embeddings.minilm) imports this module, and
    # benchmarks/reference_embeddings.py does so in a virtualenv without Django.
    from assistant.conf import assistant_settings

    if spec is None:
        spec = assistant_settings.EMBEDDER
    if not isinstance(spec, str) or not spec.strip():
        raise EmbeddingError(f"ASSISTANT['EMBEDDER'] is empty or not a string ({spec!r}). {SPEC_HELP}")
    kind, _, argument = spec.strip().partition(":")
    kind = kind.strip()
    argument = argument.strip()

    if kind == "local":
        # NumPy (about 60 ms to import) loads only where the embedder is local.
        from assistant.embeddings.minilm import MODEL_NAME, LocalEmbedder

        if argument and argument != MODEL_NAME:
            raise EmbeddingError(f"The local embedder only has {MODEL_NAME}, not {argument!r}.")
        return LocalEmbedder()
    providers: Any = assistant_settings.PROVIDERS
    providers = providers if isinstance(providers, dict) else {}
    # `openai:MODEL`, or `NAME:MODEL` for a provider entry of kind openai (say an Ollama or vLLM
    # server next to a hosted chat model), the same way the chat-model chain names providers.
    config = providers.get(kind)
    config = config if isinstance(config, dict) else {}
    if kind == "openai" or (config and config.get("kind") == "openai"):
        if not argument:
            raise EmbeddingError(f"{spec!r} names no model; write e.g. `{kind}:text-embedding-3-small`.")
        return OpenAIEmbedder(
            argument,
            provider=kind,
            api_key=config.get("api_key") or None,
            base_url=config.get("base_url") or None,
            # Recall sits in front of every turn and only ever degrades to "no memory this turn", so a
            # failing endpoint is given up on at once rather than retried with backoff (seconds per turn).
            timeout=min(10.0, float(assistant_settings.REQUEST_TIMEOUT_SECONDS)),
            max_retries=0,
        )
    if config:
        raise EmbeddingError(
            f"Provider {kind!r} (kind {config.get('kind', kind)!r}) has no embeddings endpoint here; "
            f"embedders speak the OpenAI embeddings API. {SPEC_HELP}"
        )
    raise EmbeddingError(f"Unknown embedder {spec!r}. {SPEC_HELP}")
