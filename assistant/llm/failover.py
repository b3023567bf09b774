"""The model chain: try each provider in order, retrying transient failures, skipping broken ones.

Per provider and call: a permanent failure marks the provider as skipped (in Redis, keyed by a
fingerprint of its configuration, so a changed key or URL is tried again at once); a transient
failure is retried with exponential backoff (honouring Retry-After up to a bound) and, when the
retries are spent, counted against the provider's shared circuit breaker. The next provider is
then tried. When none answers, `AllProvidersFailedError` says why for each.

Text already streamed to the user cannot be taken back, so a call that fails after streaming
some text is not retried or failed over; its error is raised as is.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

import redis

from ..conf import assistant_settings
from .breaker import CircuitBreaker, Decision, redis_client
from .errors import AllProvidersFailedError, ProviderError
from .remote import RemoteModel
from .types import ChatModel, Message, ModelResponse, TextDeltaCallback, ToolSpec

logger = logging.getLogger(__name__)

SKIP_KEY_PREFIX = "assistant:provider-skip:"


class FailoverModel:
    """A ChatModel over an ordered chain of models (the comma-separated ASSISTANT["MODEL"])."""

    def __init__(self, models: Sequence[ChatModel]) -> None:
        if not models:
            raise ValueError("A model chain needs at least one model.")
        self.models = list(models)
        self.name = ",".join(model.name for model in self.models)
        self.is_demo = self.models[0].is_demo
        self.retries = max(0, int(assistant_settings.PROVIDER_RETRIES))
        self.backoff = float(assistant_settings.RETRY_BACKOFF_SECONDS)
        self.backoff_max = float(assistant_settings.RETRY_BACKOFF_MAX_SECONDS)
        self.retry_after_max = float(assistant_settings.RETRY_AFTER_MAX_SECONDS)
        self.skip_seconds = float(assistant_settings.PERMANENT_FAILURE_SECONDS)
        self._breakers = {
            model.name: CircuitBreaker(
                model.name,
                threshold=int(assistant_settings.BREAKER_FAILURE_THRESHOLD),
                cooldown_seconds=float(assistant_settings.BREAKER_COOLDOWN_SECONDS),
                # A probe that never reports back (its worker died) must not block the provider forever.
                probe_seconds=model.config.timeout + 5.0,
            )
            for model in self.models
            if isinstance(model, RemoteModel)
        }

    def __repr__(self) -> str:
        return f"<FailoverModel {self.name}>"

    def breaker(self, provider: str) -> CircuitBreaker:
        """The shared breaker of one chain entry (for the admin, health checks and tests)."""
        return self._breakers[provider]

    def call_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text_delta: TextDeltaCallback | None = None,
    ) -> ModelResponse:
        return self._run(messages, tools, on_text_delta, use_tools=True)

    def complete(
        self, messages: Sequence[Message], *, on_text_delta: TextDeltaCallback | None = None
    ) -> ModelResponse:
        return self._run(messages, (), on_text_delta, use_tools=False)

    def _run(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text_delta: TextDeltaCallback | None,
        *,
        use_tools: bool,
    ) -> ModelResponse:
        reasons: list[str] = []
        for model in self.models:
            if not isinstance(model, RemoteModel):
                # Local models (offline, scripted) cannot be down; their errors are the answer.
                if use_tools:
                    return model.call_tools(messages, tools, on_text_delta=on_text_delta)
                return model.complete(messages, on_text_delta=on_text_delta)
            response = self._try_remote(model, messages, tools, on_text_delta, use_tools, reasons)
            if response is not None:
                return response
        raise AllProvidersFailedError(reasons)

    def _try_remote(
        self,
        model: RemoteModel,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text_delta: TextDeltaCallback | None,
        use_tools: bool,
        reasons: list[str],
    ) -> ModelResponse | None:
        skipped = self._skip_reason(model)
        if skipped:
            reasons.append(f"{skipped} (skipped until its configuration changes)")
            return None
        breaker = self._breakers[model.name]
        decision = breaker.allow()
        if decision is Decision.REFUSE:
            wait = breaker.remaining_seconds()
            when = f"; trying again in {wait:.0f}s" if wait >= 1 else "; a test request is under way"
            reasons.append(f"{model.name}: paused after repeated failures{when}")
            return None
        attempts = 1 if decision is Decision.PROBE else 1 + self.retries
        streamed = False

        def relay(delta: str) -> None:
            nonlocal streamed
            streamed = True
            assert on_text_delta is not None
            on_text_delta(delta)

        callback = relay if on_text_delta is not None else None
        for attempt in range(attempts):
            try:
                if use_tools:
                    response = model.call_tools(messages, tools, on_text_delta=callback)
                else:
                    response = model.complete(messages, on_text_delta=callback)
            except ProviderError as error:
                if error.permanent:
                    self._mark_skipped(model, error.message)
                    breaker.release_probe()
                    reasons.append(error.message)
                    return None
                if error.kind == "request":
                    breaker.release_probe()
                    reasons.append(error.message)
                    return None
                retry_after = error.retry_after or 0.0
                last = attempt == attempts - 1 or streamed or retry_after > self.retry_after_max
                if last:
                    breaker.record_failure(open_at_least=retry_after)
                    if streamed:
                        raise
                    tries = f" (after {attempt + 1} attempts)" if attempt else ""
                    reasons.append(f"{error.message}{tries}")
                    return None
                delay = max(min(self.backoff * 2**attempt, self.backoff_max), retry_after)
                logger.info(
                    "%s failed (%s); retry %d in %.2fs", model.name, error.message, attempt + 1, delay
                )
                time.sleep(delay)
                continue
            breaker.record_success()
            return dataclasses.replace(response, provider=model.name)
        return None  # unreachable: the last attempt always returns above

    def _skip_key(self, model: RemoteModel) -> str:
        return f"{SKIP_KEY_PREFIX}{model.name}:{model.config.fingerprint}"

    def _skip_reason(self, model: RemoteModel) -> str | None:
        value = self._redis(lambda r: r.get(self._skip_key(model)), default=None)
        return value.decode() if isinstance(value, bytes) else value

    def _mark_skipped(self, model: RemoteModel, reason: str) -> None:
        ttl = max(1, int(self.skip_seconds))
        self._redis(lambda r: r.set(self._skip_key(model), reason, ex=ttl), default=None)

    def _redis(self, action: Any, *, default: Any) -> Any:
        try:
            return action(redis_client())
        except redis.RedisError:
            logger.exception("Model failover: Redis is unreachable; provider skip marks are not shared")
            return default
