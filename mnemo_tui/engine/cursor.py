"""Provides the feed's opaque cursors: a position bound to a scope and filters, signed with the store's secret."""

from __future__ import annotations

import binascii
import hmac
import struct
from functools import lru_cache
from hashlib import sha256

from mnemo_tui.errors import ValidationError
from mnemo_tui.values.model import RecentQuery

# Version 2, issued now:
#   version (1) = 2 | binding fingerprint (8) | created_at (8, signed) | atom_id as stored (36 bytes) | mac (16)
# spelled as lower-case hex (138 characters): the atom id travels as the text the keyset condition binds.
# Version 1 (below) is still read: checkpoints and clients hold them.
_VERSION = 2
_BODY = struct.Struct(">B8sq36s")
_MAC_LEN = 16
_LENGTH = _BODY.size + _MAC_LEN
_SPELLED_LEN = _LENGTH * 2

# Version 1: version (1) | binding fingerprint (8) | created_at (8, signed) | atom_id (16) | mac (16), URL-safe
# base64 without padding (66 characters).
_V1_BODY = struct.Struct(">B8sq16s")
_V1_LENGTH = _V1_BODY.size + _MAC_LEN


def binding(principal: str, query: RecentQuery) -> bytes:
    """The fingerprint of what a cursor is bound to: reader, scope and every filter."""
    return _binding(principal, *query.filters())


@lru_cache(maxsize=1024)
def _binding(
    principal: str,
    scope: str | None,
    since: int | None,
    until: int | None,
    exclude: str | None,
    history: bool,
    author: str | None,
) -> bytes:
    # Once per walk, not once per page: every page of a walk has the same binding.
    parts = (
        principal,
        scope or "",
        "" if since is None else str(since),
        "" if until is None else str(until),
        exclude or "",
        "h" if history else "",
        *(() if author is None else ("author", author)),
    )
    return sha256("\x1f".join(parts).encode()).digest()[:8]


def _mac(secret: bytes, body: bytes) -> bytes:
    """HMAC-SHA256 of a cursor's body under the store's secret, truncated to 16 bytes."""
    return hmac.digest(secret, body, "sha256")[:_MAC_LEN]


def encode(secret: bytes, bound: bytes, created_at: int, atom_id: str) -> str:
    """Encode a position (the last entry returned) as a cursor string (version 2)."""
    text = atom_id.encode()
    if len(text) != 36:
        raise ValueError(f"not an atom id: {atom_id!r}")
    body = _BODY.pack(_VERSION, bound, created_at, text)
    return (body + _mac(secret, body)).hex()


def decode(secret: bytes, bound: bytes, cursor: str) -> tuple[int, str]:
    """Decode a cursor into (created_at, atom_id) after checking its shape, canonical form, MAC and binding.

    Raises:
        ValidationError: for a malformed, non-canonical, forged or foreign cursor.
    """
    if not isinstance(cursor, str):
        raise ValidationError("malformed cursor")
    if len(cursor) != _SPELLED_LEN:
        if len(cursor) == _V1_SPELLED_LEN:
            return _decode_v1(secret, bound, cursor)
        raise ValidationError("malformed cursor")
    # `fromhex` also reads upper case and skips spaces: only the bytes' own lower-case spelling is a cursor.
    try:
        raw = bytes.fromhex(cursor)
    except ValueError:  # not hex, or not ASCII
        raise ValidationError("malformed cursor") from None
    if raw.hex() != cursor:
        raise ValidationError("malformed cursor")
    body = raw[: _BODY.size]
    if not hmac.compare_digest(raw[_BODY.size :], _mac(secret, body)):
        raise ValidationError("cursor was not issued by this store (forged or foreign)")
    version, cursor_bound, created_at, atom_id = _BODY.unpack(body)
    return _position(version, _VERSION, cursor_bound, bound, created_at, atom_id.decode())


def _position(
    version: int, wanted: int, cursor_bound: bytes, bound: bytes, created_at: int, atom_id: str
) -> tuple[int, str]:
    """The position of a signed cursor body of the version its spelling says, bound as the walk is."""
    if version != wanted:
        raise ValidationError("cursor of an unknown format")
    if not hmac.compare_digest(cursor_bound, bound):
        raise ValidationError("cursor does not belong to this scope and these filters")
    return created_at, atom_id


# Version 1's spelling: the URL-safe base64 alphabet (`base64.urlsafe_b64*`), through binascii directly.
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
# 49 bytes: 16 groups of four characters and two for the last byte, whose second character carries 2 bits
# of it and 4 spare bits. The canonical spelling has the spare bits zero: the last character is one of the
# four whose value is a multiple of 16 (A, Q, g, w).
_V1_SPELLED_LEN = (_V1_LENGTH * 4 + 2) // 3
_CANONICAL_LAST = frozenset("AQgw")
_PADDING = b"=" * (-_V1_SPELLED_LEN % 4)


def _decode_v1(secret: bytes, bound: bytes, cursor: str) -> tuple[int, str]:
    """A version 1 cursor's position, checked as a version 2 cursor is."""
    # Length, alphabet and canonical last character first: then base64 decodes exactly _V1_LENGTH bytes,
    # spelled back as the same text. The alphabet: ASCII, `+`, `/` and `=` dropped (so the length no longer
    # matches), and any other byte outside base64's refused by binascii's strict mode.
    if cursor[-1] not in _CANONICAL_LAST:
        raise ValidationError("malformed cursor")
    try:
        spelled = cursor.encode("ascii").translate(_FROM_URLSAFE, b"+/=")
        if len(spelled) != _V1_SPELLED_LEN:
            raise ValueError("not the URL-safe alphabet")
        raw = binascii.a2b_base64(spelled + _PADDING, strict_mode=True)
    except (binascii.Error, ValueError):  # UnicodeEncodeError is a ValueError
        raise ValidationError("malformed cursor") from None
    if len(raw) != _V1_LENGTH:
        raise ValidationError("malformed cursor")
    body = raw[: _V1_BODY.size]
    if not hmac.compare_digest(raw[_V1_BODY.size :], _mac(secret, body)):
        raise ValidationError("cursor was not issued by this store (forged or foreign)")
    version, cursor_bound, created_at, atom_bytes = _V1_BODY.unpack(body)
    h = atom_bytes.hex()
    return _position(version, 1, cursor_bound, bound, created_at, f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
