"""`get_model()`: the ChatModel named by a model spec (by default ASSISTANT["MODEL"])."""

from __future__ import annotations

from ..conf import assistant_settings
from .anthropic_messages import AnthropicMessagesModel
from .errors import ModelConfigurationError
from .failover import FailoverModel
from .openai_chat import OpenAIChatModel
from .remote import ProviderConfig, RemoteModel
from .scripted import ScriptedModel
from .types import ChatModel


def _build(entry: str) -> ChatModel:
    if entry == "offline":
        # The demo model is a dozen modules (about 50 ms to import): paid only where a spec names it, not by
        # every process that builds a provider's model.
        from .offline import OfflineModel

        return OfflineModel()
    name, sep, rest = entry.partition(":")
    if not sep:
        raise ModelConfigurationError(
            f"Unknown model {entry!r}. Use offline, scripted:PATH, openai:MODEL, anthropic:MODEL, "
            "or NAME:MODEL with NAME a key of ASSISTANT['PROVIDERS']."
        )
    if name == "scripted":
        return ScriptedModel(rest)
    config = ProviderConfig.from_settings(
        name.strip(),
        rest.strip(),
        dict(assistant_settings.PROVIDERS or {}),
        timeout=assistant_settings.REQUEST_TIMEOUT_SECONDS,
        max_output_tokens=assistant_settings.MAX_OUTPUT_TOKENS,
    )
    remote: RemoteModel = AnthropicMessagesModel(config) if config.kind == "anthropic" else OpenAIChatModel(config)
    return remote


def get_model(spec: str | None = None) -> ChatModel:
    """A fresh model for `spec` (default: ASSISTANT["MODEL"]); make one per run.

    A comma-separated spec is a failover chain. A network provider, alone or in a chain, is wrapped
    in failover so it gets retries, the shared circuit breaker and readable errors. Raises
    `ModelConfigurationError` (a ModelError) for a spec it cannot build.
    """
    spec = assistant_settings.MODEL if spec is None else spec
    entries = [entry.strip() for entry in str(spec).split(",") if entry.strip()]
    if not entries:
        raise ModelConfigurationError("No model is configured: set ASSISTANT_MODEL (or use offline).")
    models = [_build(entry) for entry in entries]
    if len(models) == 1 and not isinstance(models[0], RemoteModel):
        return models[0]
    return FailoverModel(models)
