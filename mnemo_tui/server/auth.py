"""Provides API-key authentication: the key from `X-Api-Key` or `Authorization: Bearer`, mapped to a principal."""

from __future__ import annotations

import re

from starlette.requests import HTTPConnection
from starlette.types import Scope

from mnemo_tui.errors import AuthError

# Keys are looked up by their SHA-256 (the store keeps nothing else) and compared in constant time
# (`hmac.compare_digest`) by the engine's `principal_for_key`; this only refuses what cannot be a key.
_KEY_SHAPE = re.compile(r"^mk_[A-Za-z0-9_]{1,190}\Z")
_KEY_TOKEN = re.compile(r"mk_[A-Za-z0-9]+_[A-Za-z0-9]+")


def header(scope: Scope, name: bytes) -> str | None:
    """A request header's first value (`name` in lower case, as ASGI gives every name), as Starlette's
    `Headers.get` reads it, without copying the headers into a `Headers` or raising for a missing one (every
    request reads the key and a few others, most of them missing: ~8k instructions each through `Headers`)."""
    for key, value in scope["headers"]:
        if key == name:
            found: str = value.decode("latin-1")
            return found
    return None


def presented_key(request: HTTPConnection) -> str:
    """The key the caller presented.

    Raises:
        AuthError: no key (`missing_key`) or one that cannot be a key (`malformed_key`).
    """
    key = header(request.scope, b"x-api-key")
    if key is None:
        bearer = header(request.scope, b"authorization")
        if bearer is not None:
            scheme, _, token = bearer.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthError("Authorization must be `Bearer <key>`", details={"reason": "malformed_key"})
            key = token.strip()
    if key is None or not key.strip():
        raise AuthError(
            "an API key is required: send it as X-Api-Key or Authorization: Bearer", details={"reason": "missing_key"}
        )
    key = key.strip()
    if not _KEY_SHAPE.match(key):
        raise AuthError("malformed API key", details={"reason": "malformed_key"})
    return key


def redact(text: str) -> str:
    """The text with anything shaped like an API key blanked (for logs)."""
    return _KEY_TOKEN.sub("mk_[redacted]", text) if "mk_" in text else text
