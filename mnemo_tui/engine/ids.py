"""Provides identifiers: ULIDs for rooms, UUIDs for atoms, and hashed secrets for invite codes and API keys."""

from __future__ import annotations

import os
import time
from hashlib import sha256

# secrets and uuid are imported where used: `mnemo recent` never needs them, and they cost its cold start.

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# The variant's two top bits are 10: a random hex digit becomes one of 8, 9, a, b (its two low bits kept).
_VARIANT = dict(zip("0123456789abcdef", "89ab89ab89ab89ab", strict=True))


def ulid() -> str:
    """A new ULID: 48 bits of milliseconds and 80 random bits, Crockford base32."""
    import secrets

    value = (time.time_ns() // 1_000_000) << 80 | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def atom_id() -> str:
    """A new random atom id: a UUID4 (122 random bits, version 4, RFC 4122 variant) as `str(uuid.uuid4())`
    spells it, without building a `UUID` object per write."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def invite_code() -> str:
    """A new invite code, `mnvr_` + 32 url-safe characters; only its hash is stored."""
    import secrets

    return "mnvr_" + secrets.token_urlsafe(24)


def api_key() -> str:
    """A new API key in the service's shape: `mk_live_` + 32 lower-case hex characters."""
    import secrets

    return "mk_live_" + secrets.token_hex(16)


def digest(secret: str) -> str:
    """The stored form of a code or key: SHA-256 hex (they carry 128+ random bits, so no salt is needed)."""
    return sha256(secret.encode()).hexdigest()
