"""How a run keeps the session it acts with: never in clear.

A session key signs its person in, so a run holds it in two forms, neither of which anyone but the server
can use (see `AgentRun.session_digest` and `AgentRun.session_sealed`):

- a **digest**, HMAC-SHA256 of the key under a key derived from `SECRET_KEY`: what the database looks
  runs up by ("the runs of this session", when it ends). Equal keys give equal digests, so it is indexed;
  without the secret, nobody can tell which key a digest belongs to, or match one to a guess — a `regex`
  or `startswith` on it says nothing about the key;
- the key **sealed** with AES-256-GCM under another key derived from `SECRET_KEY`: what the worker opens to
  make the run's tool calls as real requests with that session's cookie. Authenticated encryption, so a
  sealed value that was altered does not open (to anything).

Why sealed and not only referenced: the worker's tool calls go through the site's own middleware with the
person's session cookie, so the server must get the key itself back; and a run must survive a restart of
Redis or of every process, so the only copy cannot live in memory or in Redis.

Rotating `SECRET_KEY` with the old one in `SECRET_KEY_FALLBACKS` keeps everything working: a key sealed
under a fallback still opens, and a session's runs are looked up by its digests under the current secret
and every fallback. A secret replaced without a fallback signs everyone out (their sessions were signed
with it too); a run sealed under it can no longer be opened, and ends as its session has.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.utils.crypto import salted_hmac

# Domain separation: the digest and the encryption key are derived from the secret for this use only.
_DIGEST_SALT = "assistant.AgentRun.session_digest"
_SEAL_SALT = "assistant.AgentRun.session_sealed"
# The sealed value's layout, `version (1 byte) | nonce (12) | ciphertext and tag`: a later format can be
# told apart from this one, and this one still opened.
_VERSION = b"\x01"
_NONCE_BYTES = 12
# Bound into the tag: a value sealed for another purpose under the same derived key does not open here.
_ASSOCIATED = b"assistant session key v1"


class SessionKeyUnreadable(Exception):
    """A sealed session key that no secret the site has (current or fallback) opens."""


def _secrets() -> list[str | bytes]:
    return [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]


def _digest(session_key: str, secret: str | bytes) -> str:
    return salted_hmac(_DIGEST_SALT, session_key, secret=secret, algorithm="sha256").hexdigest()


def _cipher(secret: str | bytes) -> AESGCM:
    return AESGCM(salted_hmac(_SEAL_SALT, "AES-256-GCM", secret=secret, algorithm="sha256").digest())


def session_key_digest(session_key: str) -> str:
    """The digest a run stores for `session_key`, under the current secret (64 hex characters)."""
    return _digest(session_key, settings.SECRET_KEY)


def session_key_digests(session_key: str) -> list[str]:
    """Every digest a run sent from `session_key` may carry: under the current secret and each fallback
    (a run made before the secret was rotated carries the old one)."""
    return list(dict.fromkeys(_digest(session_key, secret) for secret in _secrets()))


def session_key_seal(session_key: str) -> bytes:
    """`session_key` sealed under the current secret; a fresh nonce each time."""
    nonce = os.urandom(_NONCE_BYTES)
    return _VERSION + nonce + _cipher(settings.SECRET_KEY).encrypt(nonce, session_key.encode(), _ASSOCIATED)


def session_key_open(sealed: bytes | memoryview | Iterable[int]) -> str:
    """The session key `sealed` holds; raises SessionKeyUnreadable when no secret of the site opens it."""
    value = bytes(sealed)
    if len(value) <= 1 + _NONCE_BYTES or value[:1] != _VERSION:
        raise SessionKeyUnreadable("not a sealed session key")
    nonce, ciphertext = value[1:1 + _NONCE_BYTES], value[1 + _NONCE_BYTES:]
    for secret in _secrets():
        try:
            return _cipher(secret).decrypt(nonce, ciphertext, _ASSOCIATED).decode()
        except InvalidTag:
            continue
    raise SessionKeyUnreadable("sealed under a secret this site no longer has")
