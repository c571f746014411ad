"""Provides SHA-256 and a constant-time comparison without loading OpenSSL: CPython's own implementations.

Importing `hashlib` or `hmac` loads OpenSSL (`_hashlib`): ~4 ms of every start of `mnemo recent`,
for digests CPython's built-in SHA-256 computes alike (`tests/engine/test_cursor_format.py`
checks the cursor's MAC against `hmac` and `hashlib`). Other interpreters get `hashlib`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from hashlib import _Hash

    sha256: Callable[[bytes], _Hash]
    compare_digest: Callable[[bytes | str, bytes | str], bool]  # str: ASCII only, as hmac's
else:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12 and later
        except ImportError:  # pragma: no cover - not CPython
            from hashlib import sha256
    try:
        from _operator import _compare_digest as compare_digest  # what `hmac.compare_digest` falls back to
    except ImportError:  # pragma: no cover - not CPython
        from hmac import compare_digest

__all__ = ["compare_digest", "sha256"]
