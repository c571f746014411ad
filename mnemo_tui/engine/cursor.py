"""Provides the feed's opaque cursors: a position bound to a scope and filters, signed with the store's secret."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct

from mnemo_tui.errors import ValidationError
from mnemo_tui.model import CURSOR_SHAPE, RecentQuery

_VERSION = 1
# version (1) | binding fingerprint (8) | created_at (8, signed) | atom_id (16) | mac (16)
_BODY = struct.Struct(">B8sq16s")
_MAC_LEN = 16
_LENGTH = _BODY.size + _MAC_LEN


def binding(principal: str, query: RecentQuery) -> bytes:
    """The fingerprint of what a cursor is bound to: reader, scope and every filter."""
    parts = (
        principal,
        query.scope or "",
        "" if query.since is None else str(query.since),
        "" if query.until is None else str(query.until),
        query.exclude_author or "",
        "h" if query.include_history else "",
        *(() if query.author is None else ("author", query.author)),
    )
    return hashlib.sha256("\x1f".join(parts).encode()).digest()[:8]


def _uuid_bytes(atom_id: str) -> bytes:
    # The 16 bytes of a canonical UUID, without importing uuid at start-up (it costs a cold start).
    raw = bytes.fromhex(atom_id.replace("-", ""))
    if len(raw) != 16:
        raise ValueError(f"not an atom id: {atom_id!r}")
    return raw


def encode(secret: bytes, bound: bytes, created_at: int, atom_id: str) -> str:
    """Encode a position (the last entry returned) as a cursor string."""
    body = _BODY.pack(_VERSION, bound, created_at, _uuid_bytes(atom_id))
    mac = hmac.new(secret, body, hashlib.sha256).digest()[:_MAC_LEN]
    return base64.urlsafe_b64encode(body + mac).decode().rstrip("=")


def decode(secret: bytes, bound: bytes, cursor: str) -> tuple[int, str]:
    """Decode a cursor into (created_at, atom_id) after checking its shape, canonical form, MAC and binding.

    Raises:
        ValidationError: for a malformed, non-canonical, forged or foreign cursor.
    """
    if not CURSOR_SHAPE.match(cursor) or "=" in cursor:
        raise ValidationError("malformed cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise ValidationError("malformed cursor") from None
    if len(raw) != _LENGTH:
        raise ValidationError("malformed cursor")
    # base64 ignores the spare bits of the last character: only the canonical spelling is accepted.
    if base64.urlsafe_b64encode(raw).decode().rstrip("=") != cursor:
        raise ValidationError("malformed cursor")
    body, mac = raw[: _BODY.size], raw[_BODY.size :]
    expected = hmac.new(secret, body, hashlib.sha256).digest()[:_MAC_LEN]
    if not hmac.compare_digest(mac, expected):
        raise ValidationError("cursor was not issued by this store (forged or foreign)")
    version, cursor_bound, created_at, atom_bytes = _BODY.unpack(body)
    if version != _VERSION:
        raise ValidationError("cursor of an unknown format")
    if not hmac.compare_digest(cursor_bound, bound):
        raise ValidationError("cursor does not belong to this scope and these filters")
    h = atom_bytes.hex()
    return created_at, f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
