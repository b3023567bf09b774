"""Model errors, and the classification failover relies on.

Every failure the loop can see is a `ModelError` whose `str()` is a sentence a user can read.
Provider failures are `ProviderError`s with a `kind` that decides what failover does:

- `permanent` (authentication, payment, unknown model, missing configuration): the provider is
  skipped without retrying, until its configuration changes;
- `transient` (429, timeouts, connection failures, 408/409/5xx): retried with exponential backoff,
  then counted against the provider's circuit breaker;
- `request` (any other 4xx): this request was refused; the next provider is tried, no retry, and
  the breaker is not touched because the provider itself is healthy.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Literal

ErrorKind = Literal["permanent", "transient", "request"]


class ModelError(Exception):
    """A model call failed; `str(error)` (also `.message`) is readable by the person using the app."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ModelConfigurationError(ModelError):
    """The model setting names something that cannot be built (unknown provider, bad script...)."""


class ScriptExhaustedError(ModelError):
    """A scripted model was called more often than its script has entries."""


class ProviderError(ModelError):
    """One provider failed one request; `kind` drives retry, skip and the circuit breaker."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind,
        provider: str = "",
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.provider = provider
        self.status = status
        self.retry_after = retry_after

    @property
    def permanent(self) -> bool:
        return self.kind == "permanent"

    @property
    def transient(self) -> bool:
        return self.kind == "transient"


class AllProvidersFailedError(ModelError):
    """Every entry of the model chain failed; the message lists why, one provider per line."""

    def __init__(self, reasons: list[str]) -> None:
        lines = "\n".join(f"- {reason}" for reason in reasons)
        super().__init__(f"The language model is unavailable right now; please try again later.\n{lines}")
        self.reasons = reasons


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from `Retry-After` (seconds or an HTTP date) or `retry-after-ms`, if present."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = (lowered.get(name) or "").strip()
        if not value:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            if scale != 1.0:
                continue  # a malformed millisecond header: Retry-After may still be usable
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - (now if now is not None else time.time()))
    return None


def classify_status(
    status: int,
    *,
    provider: str,
    detail: str = "",
    headers: Mapping[str, str] | None = None,
    credential_hint: str = "",
) -> ProviderError:
    """A ProviderError for an HTTP error status, worded for a reader and classified for failover."""
    detail = f": {detail}" if detail else ""
    if status in (401, 403):
        hint = f" Check {credential_hint}." if credential_hint else ""
        return ProviderError(
            f"{provider}: the provider rejected the credentials (HTTP {status}){detail}.{hint}",
            kind="permanent",
            provider=provider,
            status=status,
        )
    if status == 402:
        return ProviderError(
            f"{provider}: the provider account needs payment or credit (HTTP 402){detail}.",
            kind="permanent",
            provider=provider,
            status=status,
        )
    if status == 404:
        return ProviderError(
            f"{provider}: the model or endpoint was not found (HTTP 404){detail}. Check the model name "
            "and base URL.",
            kind="permanent",
            provider=provider,
            status=status,
        )
    if status == 429:
        retry_after = parse_retry_after(headers)
        wait = f" (asked to wait {retry_after:g}s)" if retry_after is not None else ""
        return ProviderError(
            f"{provider}: too many requests (HTTP 429){wait}{detail}.",
            kind="transient",
            provider=provider,
            status=status,
            retry_after=retry_after,
        )
    if status in (408, 409) or status >= 500:
        return ProviderError(
            f"{provider}: the provider had a server error (HTTP {status}){detail}.",
            kind="transient",
            provider=provider,
            status=status,
            retry_after=parse_retry_after(headers),
        )
    return ProviderError(
        f"{provider}: the provider refused the request (HTTP {status}){detail}.",
        kind="request",
        provider=provider,
        status=status,
    )


def timeout_error(provider: str, seconds: float) -> ProviderError:
    return ProviderError(f"{provider}: no answer within {seconds:g}s.", kind="transient", provider=provider)


def connection_error(provider: str, detail: str = "") -> ProviderError:
    detail = f" ({detail})" if detail else ""
    return ProviderError(
        f"{provider}: could not connect to the provider{detail}.", kind="transient", provider=provider
    )


def error_detail(body: object) -> str:
    """The provider's own error message, kept short: it often says exactly what is wrong."""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str):
            return message[:300]
    return ""
