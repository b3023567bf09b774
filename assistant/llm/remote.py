"""What the network adapters share: their configuration and the client cache."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .errors import (
    ModelConfigurationError,
    ProviderError,
    classify_status,
    connection_error,
    error_detail,
    timeout_error,
)
from .types import Message, ModelResponse, TextDeltaCallback, ToolSpec

KINDS = ("openai", "anthropic")
PROVIDER_KEYS = frozenset({"kind", "api_key", "base_url", "stream", "max_tokens_field"})


@dataclass(frozen=True)
class ProviderConfig:
    """One chain entry's endpoint: `name:model`, where `name` is a key of ASSISTANT["PROVIDERS"]."""

    name: str
    kind: str
    model: str
    # A credential: kept out of the repr, so a config in a log line or an error report shows no key.
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 60.0
    max_output_tokens: int = 1024
    #: Stream when someone listens for text deltas; False for servers that cannot stream tool calls.
    stream: bool = True
    #: OpenAI kind only: which body field carries the output limit (compatible servers differ).
    max_tokens_field: str | None = None

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.model}"

    @property
    def fingerprint(self) -> str:
        """Changes whenever the endpoint, model or key changes, so a permanent failure is forgotten."""
        material = "\0".join([self.kind, self.model, self.base_url or "", self.api_key or ""])
        return hashlib.sha256(material.encode()).hexdigest()[:16]

    @classmethod
    def from_settings(
        cls, name: str, model: str, providers: dict[str, Any], *, timeout: float, max_output_tokens: int
    ) -> ProviderConfig:
        options = providers.get(name)
        if options is None and name not in KINDS:
            raise ModelConfigurationError(
                f"Unknown model provider {name!r} in {name}:{model}. Use offline, scripted:PATH, "
                f"openai:MODEL, anthropic:MODEL, or NAME:MODEL with NAME a key of ASSISTANT['PROVIDERS']."
            )
        options = dict(options or {})
        unknown = sorted(set(options) - PROVIDER_KEYS)
        if unknown:
            raise ModelConfigurationError(
                f"Unknown option(s) {', '.join(unknown)} for provider {name!r}; "
                f"known: {', '.join(sorted(PROVIDER_KEYS))}."
            )
        kind = options.get("kind", name)
        if kind not in KINDS:
            raise ModelConfigurationError(
                f"Provider {name!r} has kind {kind!r}; use one of {', '.join(KINDS)}."
            )
        if not model:
            raise ModelConfigurationError(f"The model spec {name}: names no model (use {name}:MODEL).")
        return cls(
            name=name,
            kind=kind,
            model=model,
            api_key=options.get("api_key") or None,
            base_url=(options.get("base_url") or None),
            timeout=float(timeout),
            max_output_tokens=int(max_output_tokens),
            stream=bool(options.get("stream", True)),
            max_tokens_field=options.get("max_tokens_field"),
        )


class RemoteModel:
    """Base of the network adapters: subclasses implement `_call`."""

    is_demo = False
    #: The environment variable to name when credentials are rejected.
    credential_hint = ""

    @contextmanager
    def sdk_errors(self, sdk: Any) -> Iterator[None]:
        """Turn an official SDK's exceptions into ProviderErrors; the openai and anthropic SDKs share
        the same exception classes by name."""
        try:
            yield
        except sdk.APITimeoutError as exc:
            raise timeout_error(self.name, self.config.timeout) from exc
        except sdk.APIConnectionError as exc:
            raise connection_error(self.name, str(exc.__cause__ or exc)) from exc
        except sdk.APIStatusError as exc:
            raise classify_status(
                exc.status_code,
                provider=self.name,
                detail=error_detail(exc.body),
                headers=dict(exc.response.headers),
                credential_hint=self.credential_hint,
            ) from exc
        except sdk.APIError as exc:
            # A stream that ended with an error event, or a body the SDK could not read.
            raise ProviderError(f"{self.name}: {exc.message}", kind="transient", provider=self.name) from exc

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.name = config.spec

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def call_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text_delta: TextDeltaCallback | None = None,
    ) -> ModelResponse:
        """One request to the provider; failures are `ProviderError`s (no retry here: see failover)."""
        return self._call(list(messages), list(tools), on_text_delta)

    def complete(
        self, messages: Sequence[Message], *, on_text_delta: TextDeltaCallback | None = None
    ) -> ModelResponse:
        return self._call(list(messages), [], on_text_delta)

    def _call(
        self, messages: list[Message], tools: list[ToolSpec], on_text_delta: TextDeltaCallback | None
    ) -> ModelResponse:
        raise NotImplementedError

    def _client(self) -> Any:
        raise NotImplementedError

    def load_sdk(self) -> None:
        """Import the provider's SDK (a second or more on a small machine) now rather than in the first call."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Load the SDK and build this process's client, so that the first call pays for neither.
        Makes no network call; a missing API key raises the `ProviderError` the first call would."""
        self._client()

    def _missing_key(self) -> ProviderError:
        return ProviderError(
            f"{self.name}: no API key is configured. Set {self.credential_hint}.",
            kind="permanent",
            provider=self.name,
        )


_clients: dict[tuple[Any, ...], Any] = {}
_clients_lock = threading.Lock()


def cached_client(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """One SDK client per endpoint and key per process: they hold connection pools worth reusing."""
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = build()
        return client


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict, or ({}, raw) when the model wrote something that is not a JSON object, or
    one Python cannot read (nested past the recursion limit, an integer of thousands of digits)."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return {}, raw
    if not isinstance(value, dict):
        return {}, raw
    return value, None
