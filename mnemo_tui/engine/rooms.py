"""Provides shared rooms, invites and membership, the vault, and API keys of the embedded store."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import TypeVar

from mnemo_tui import timefmt
from mnemo_tui.engine import ids
from mnemo_tui.engine.store import Store
from mnemo_tui.errors import AuthError, Conflict, Forbidden, NotFound, ValidationError
from mnemo_tui.model import ALIAS_SHAPE, ROOM_ID, ROOM_PREFIX, Invite, Joined, Room, SecretInfo

T = TypeVar("T")
DAY_US = 86_400 * 1_000_000


def _tx(store: Store, fn: Callable[[], T]) -> T:
    with store._lock:
        store.db.execute("BEGIN IMMEDIATE")
        try:
            result = fn()
            store.db.execute("COMMIT")
            return result
        except BaseException:
            if store.db.in_transaction:
                store.db.execute("ROLLBACK")
            raise


def list_rooms(store: Store, principal: str) -> list[Room]:
    """Rooms the principal owns, then rooms it joined, each once, oldest first within each."""
    with store._lock:
        rows = store.db.execute(
            "SELECT r.room_id, r.name, m.role, m.scope, r.archived FROM members m "
            "JOIN rooms r ON r.room_id = m.room_id WHERE m.principal = ? "
            "ORDER BY m.role = 'owner' DESC, m.joined_at, r.room_id",
            (principal,),
        ).fetchall()
    return [Room(room_id=r[0], name=r[1], role=r[2], scope=r[3], archived=bool(r[4])) for r in rows]


def create_room(store: Store, principal: str, name: str, description: str | None = None) -> Room:
    """Create a room owned by the principal.

    Raises:
        ValidationError: a blank or over-long name.
        Conflict: the principal already has a room of that name.
    """
    name = name.strip() if isinstance(name, str) else ""
    if not 1 <= len(name) <= 100:
        raise ValidationError("room name must be 1 to 100 characters")
    if description is not None and len(description) > 1000:
        raise ValidationError("room description is at most 1000 characters")

    def run() -> Room:
        taken = store.db.execute("SELECT 1 FROM rooms WHERE owner = ? AND name = ?", (principal, name)).fetchone()
        if taken:
            raise Conflict(f"you already have a room named {name!r}")
        room_id = "room_" + ids.ulid()
        now = timefmt.now_us()
        bucket = store.db.execute("INSERT INTO buckets(kind, owner) VALUES ('room', ?)", (room_id,)).lastrowid
        store.db.execute(
            "INSERT INTO rooms(room_id, bucket, name, description, owner, created_at) VALUES (?,?,?,?,?,?)",
            (room_id, bucket, name, description, principal, now),
        )
        store.db.execute(
            "INSERT INTO members(room_id, principal, role, scope, joined_at) VALUES (?,?,'owner','read_write',?)",
            (room_id, principal, now),
        )
        return Room(room_id=room_id, name=name, role="owner", scope="read_write")

    return _tx(store, run)


def resolve_room(store: Store, principal: str, ref: str) -> str:
    """A room id from an address, an id or the name of a room the principal belongs to.

    Raises:
        Forbidden: no such room among the principal's rooms (an unknown room reads like a foreign one).
    """
    room_id = ref[len(ROOM_PREFIX) :] if ref.startswith(ROOM_PREFIX) else ref
    if ROOM_ID.match(room_id):
        return room_id
    matches = [r for r in list_rooms(store, principal) if r.name == ref]
    if len(matches) == 1:
        return matches[0].room_id
    if len(matches) > 1:
        raise ValidationError(f"several of your rooms are named {ref!r}; use the xroom: address")
    raise Forbidden(f"you are not a member of a room {ref!r} (or it does not exist)")


def create_invite(
    store: Store, principal: str, room_id: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1
) -> Invite:
    """Create an invite to a room the principal owns; the code is returned once and stored hashed.

    Raises:
        ValidationError: scope, expiry (1–90 days) or uses (1–1000) out of range.
        Forbidden: not the owner, not a member, or no such room.
    """
    if scope not in ("read", "read_write"):
        raise ValidationError("invite scope is read or read_write")
    if isinstance(expires_days, bool) or not 1 <= expires_days <= 90:
        raise ValidationError("expires_in_days must be between 1 and 90")
    if isinstance(max_uses, bool) or not 1 <= max_uses <= 1000:
        raise ValidationError("max_uses must be between 1 and 1000")

    def run() -> Invite:
        row = store.db.execute(
            "SELECT role FROM members WHERE room_id = ? AND principal = ?", (room_id, principal)
        ).fetchone()
        if row is None:
            raise Forbidden("you are not a member of this room (or it does not exist)")
        if row[0] != "owner":
            raise Forbidden("only the room's owner can invite")
        code = ids.invite_code()
        invite_id = "inv_" + ids.ulid()
        now = timefmt.now_us()
        expires = now + expires_days * DAY_US
        store.db.execute(
            "INSERT INTO invites(invite_id, room_id, code_hash, scope, expires_at, max_uses, created_by, created_at)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (invite_id, room_id, ids.digest(code), scope, expires, max_uses, principal, now),
        )
        return Invite(
            code=code, room_id=room_id, invite_id=invite_id, scope=scope, expires_at=expires, max_uses=max_uses
        )

    return _tx(store, run)


def join(store: Store, principal: str, code: str) -> Joined:
    """Join a room by invite code; joining a room one is already in is a no-op success.

    Raises:
        NotFound: an unknown code.
        Conflict: a code used up or expired.
    """
    if not isinstance(code, str) or not code.startswith("mnvr_") or len(code) > 200:
        raise NotFound("unknown invite code")

    def run() -> Joined:
        row = store.db.execute(
            "SELECT i.invite_id, i.room_id, i.scope, i.expires_at, i.max_uses, i.uses, r.name, i.code_hash "
            "FROM invites i JOIN rooms r ON r.room_id = i.room_id WHERE i.code_hash = ?",
            (ids.digest(code),),
        ).fetchone()
        if row is None or not hmac.compare_digest(row[7], ids.digest(code)):
            raise NotFound("unknown invite code")
        invite_id, room_id, scope, expires, max_uses, uses, name, _ = row
        member = store.db.execute(
            "SELECT scope FROM members WHERE room_id = ? AND principal = ?", (room_id, principal)
        ).fetchone()
        if member is not None:
            return Joined(room_id=room_id, name=name, scope=member[0], already_member=True)
        if expires < timefmt.now_us():
            raise Conflict("this invite has expired")
        if uses >= max_uses:
            raise Conflict("this invite has been used up")
        store.db.execute("UPDATE invites SET uses = uses + 1 WHERE invite_id = ?", (invite_id,))
        store.db.execute(
            "INSERT INTO members(room_id, principal, role, scope, joined_at) VALUES (?,?,'member',?,?)",
            (room_id, principal, scope, timefmt.now_us()),
        )
        return Joined(room_id=room_id, name=name, scope=scope, already_member=False)

    return _tx(store, run)


# -- the vault ----------------------------------------------------------------------------


def vault_list(store: Store, principal: str) -> list[SecretInfo]:
    """The principal's secrets: alias, context, time and concepts, never the value."""
    with store._lock:
        rows = store.db.execute(
            "SELECT alias, context, created_at, concepts FROM vault WHERE principal = ? ORDER BY alias",
            (principal,),
        ).fetchall()
    return [SecretInfo(alias=r[0], context=r[1], created_at=r[2], concepts=tuple(json.loads(r[3]))) for r in rows]


def vault_add(
    store: Store, principal: str, alias: str, context: str, sealed_b64: str, concepts: tuple[str, ...] = ()
) -> str:
    """Store a sealed secret under an alias; returns its atom id.

    Raises:
        ValidationError: a bad alias, an empty value.
        Conflict: the alias exists already.
    """
    if not isinstance(alias, str) or not 1 <= len(alias) <= 200 or not ALIAS_SHAPE.match(alias):
        raise ValidationError("alias must match ^[A-Za-z0-9._-]+$ (at most 200 characters)")
    if not sealed_b64:
        raise ValidationError("the secret's value is empty")
    if len(context) > 10_000:  # the hosted service's CreateSecretRequest.context maxLength
        raise ValidationError("context is at most 10000 characters")

    def run() -> str:
        if store.db.execute("SELECT 1 FROM vault WHERE principal = ? AND alias = ?", (principal, alias)).fetchone():
            raise Conflict(f"a secret named {alias!r} exists already")
        atom = ids.atom_id()
        store.db.execute(
            "INSERT INTO vault(atom_id, principal, alias, context, sealed, concepts, created_at) VALUES (?,?,?,?,?,?,?)",
            (atom, principal, alias, context, sealed_b64, json.dumps(list(concepts)), timefmt.now_us()),
        )
        return atom

    return _tx(store, run)


# -- API keys -----------------------------------------------------------------------------


def create_key(store: Store, principal: str) -> tuple[str, str]:
    """Issue an API key for a principal; returns (key_id, key). Only the key's hash is kept."""
    if not principal or len(principal) > 200 or not principal.strip():
        raise ValidationError("principal must be 1 to 200 characters")
    key = ids.api_key()
    key_id = "key_" + ids.ulid()
    _tx(
        store,
        lambda: store.db.execute(
            "INSERT INTO api_keys(key_id, principal, key_hash, created_at) VALUES (?,?,?,?)",
            (key_id, principal, ids.digest(key), timefmt.now_us()),
        ),
    )
    return key_id, key


def list_keys(store: Store) -> list[dict[str, object]]:
    """Every key's id, principal, creation time and whether it is revoked; never a key."""
    with store._lock:
        rows = store.db.execute(
            "SELECT key_id, principal, created_at, revoked_at FROM api_keys ORDER BY created_at, key_id"
        ).fetchall()
    return [
        {"key_id": r[0], "principal": r[1], "created_at": timefmt.to_iso(r[2]), "revoked": r[3] is not None}
        for r in rows
    ]


def revoke_key(store: Store, key_id: str) -> None:
    """Revoke a key by id.

    Raises:
        NotFound: no such key.
    """

    def run() -> None:
        cur = store.db.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (timefmt.now_us(), key_id)
        )
        if cur.rowcount == 0 and not store.db.execute("SELECT 1 FROM api_keys WHERE key_id = ?", (key_id,)).fetchone():
            raise NotFound(f"no key {key_id}")

    _tx(store, run)


def principal_for_key(store: Store, key: str) -> str:
    """The principal an API key maps to.

    Raises:
        AuthError: malformed, unknown or revoked key (with `details.reason`).
    """
    if not key.startswith("mk_") or len(key) > 200:
        raise AuthError("malformed API key", details={"reason": "malformed_key"})
    wanted = ids.digest(key)
    with store._lock:
        row = store.db.execute(
            "SELECT principal, revoked_at, key_hash FROM api_keys WHERE key_hash = ?", (wanted,)
        ).fetchone()
    if row is None or not hmac.compare_digest(row[2], wanted):
        raise AuthError("unknown API key", details={"reason": "invalid_key"})
    if row[1] is not None:
        raise AuthError("this API key has been revoked", details={"reason": "revoked_key"})
    return str(row[0])
