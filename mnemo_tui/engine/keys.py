"""Provides the embedded store's API keys: issued once, kept as SHA-256, mapped to a principal."""

from __future__ import annotations

from hmac import compare_digest
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine import ids
from mnemo_tui.engine.base import Database
from mnemo_tui.errors import AuthError, NotFound, ValidationError

if TYPE_CHECKING:
    from mnemo_tui.values.secrets import KeyInfo


class KeyOps(Database):
    """Keys of `mnemo serve`: the store holds only their hashes."""

    def create_key(self, principal: str) -> tuple[str, str]:
        """Issue an API key for a principal; returns (key_id, key). Only the key's hash is kept."""
        if not principal or len(principal) > 200 or not principal.strip():
            raise ValidationError("principal must be 1 to 200 characters")
        key = ids.api_key()
        key_id = "key_" + ids.ulid()
        with self.transaction() as db:
            db.execute(
                "INSERT INTO api_keys(key_id, principal, key_hash, created_at) VALUES (?,?,?,?)",
                (key_id, principal, ids.digest(key), timefmt.now_us()),
            )
        return key_id, key

    def list_keys(self) -> list[KeyInfo]:
        """Every key's id, principal, creation time and whether it is revoked; never a key."""
        from mnemo_tui.values.secrets import KeyInfo

        with self.reading() as db:
            rows = db.execute(
                "SELECT key_id, principal, created_at, revoked_at FROM api_keys ORDER BY created_at, key_id"
            ).fetchall()
        return [KeyInfo(key_id=r[0], principal=r[1], created_at=r[2], revoked=r[3] is not None) for r in rows]

    def revoke_key(self, key_id: str) -> None:
        """Revoke a key by id.

        Raises:
            NotFound: no such key.
        """
        with self.transaction() as db:
            cur = db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (timefmt.now_us(), key_id)
            )
            if cur.rowcount == 0 and not db.execute("SELECT 1 FROM api_keys WHERE key_id = ?", (key_id,)).fetchone():
                raise NotFound(f"no key {key_id}")

    def principal_for_key(self, key: str) -> str:
        """The principal an API key maps to.

        Raises:
            AuthError: malformed, unknown or revoked key (with `details.reason`).
        """
        if not key.startswith("mk_") or len(key) > 200:
            raise AuthError("malformed API key", details={"reason": "malformed_key"})
        wanted = ids.digest(key)
        with self.reading() as db:
            row = db.execute(
                "SELECT principal, revoked_at, key_hash FROM api_keys WHERE key_hash = ?", (wanted,)
            ).fetchone()
        if row is None or not compare_digest(row[2], wanted):
            raise AuthError("unknown API key", details={"reason": "invalid_key"})
        if row[1] is not None:
            raise AuthError("this API key has been revoked", details={"reason": "revoked_key"})
        return str(row[0])

    def key_id_for_key(self, key: str) -> str:
        """The id (`key_...`, as `mnemo keys list` shows it) of a key `principal_for_key` accepted; "" if none."""
        with self.reading() as db:
            row = db.execute("SELECT key_id FROM api_keys WHERE key_hash = ?", (ids.digest(key),)).fetchone()
        return "" if row is None else str(row[0])
