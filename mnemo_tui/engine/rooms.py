"""Provides the embedded store's shared rooms: creation, membership and invites."""

from __future__ import annotations

from hmac import compare_digest
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine import ids
from mnemo_tui.engine.atoms import AtomOps
from mnemo_tui.engine.rules import refuse_nul
from mnemo_tui.errors import Conflict, NotFound, ValidationError
from mnemo_tui.limits import ROOM_ID

if TYPE_CHECKING:
    from mnemo_tui.values.rooms import Invite, Joined, Room

DAY_US = 86_400 * 1_000_000


class RoomOps(AtomOps):
    """Rooms are buckets with members; membership is joined inside every statement that reads a room."""

    def list_rooms(self, principal: str) -> list[Room]:
        """Rooms the principal owns, then rooms it joined, each once, oldest first within each."""
        from mnemo_tui.values.rooms import Room

        with self.reading() as db:
            rows = db.execute(
                "SELECT r.room_id, r.name, m.role, m.scope, r.archived FROM members m "
                "JOIN rooms r ON r.room_id = m.room_id WHERE m.principal = ? "
                "ORDER BY m.role = 'owner' DESC, m.joined_at, r.room_id",
                (principal,),
            ).fetchall()
        return [Room(room_id=r[0], name=r[1], role=r[2], scope=r[3], archived=bool(r[4])) for r in rows]

    def create_room(
        self, principal: str, name: str, description: str | None = None, *, room_id: str | None = None
    ) -> Room:
        """Create a room owned by the principal (`room_id` fixes its id, for pictures and tests).

        Raises:
            ValidationError: a blank or over-long name.
            Conflict: the principal already has a room of that name.
        """
        from mnemo_tui.values.rooms import Room

        name = name.strip() if isinstance(name, str) else ""
        if not 1 <= len(name) <= 200:  # the hosted schema's bounds (CreateRoomRequestSchema)
            raise ValidationError("room name must be 1 to 200 characters")
        if description is not None and len(description) > 2000:
            raise ValidationError("room description is at most 2000 characters")
        refuse_nul("room name", name)
        refuse_nul("room description", description)
        if room_id is not None and not ROOM_ID.match(room_id):
            raise ValidationError(f"{room_id!r} is not a room id")
        with self.transaction() as db:
            taken = db.execute("SELECT 1 FROM rooms WHERE owner = ? AND name = ?", (principal, name)).fetchone()
            if taken:
                raise Conflict(f"you already have a room named {name!r}")
            room_id = room_id or "room_" + ids.ulid()
            now = timefmt.now_us()
            bucket = self.create_bucket("room", room_id)
            db.execute(
                "INSERT INTO rooms(room_id, bucket, name, description, owner, created_at) VALUES (?,?,?,?,?,?)",
                (room_id, bucket, name, description, principal, now),
            )
            db.execute(
                "INSERT INTO members(room_id, principal, role, scope, joined_at) VALUES (?,?,'owner','read_write',?)",
                (room_id, principal, now),
            )
        return Room(room_id=room_id, name=name, role="owner", scope="read_write")

    def resolve_room(self, principal: str, ref: str) -> str:
        """A room id from an address, an id or the name of a room the principal belongs to.

        Raises:
            Forbidden: no such room among the principal's rooms (an unknown room reads like a foreign one).
            ValidationError: several of the principal's rooms bear that name.
        """
        from mnemo_tui.values.rooms import room_id_of

        return room_id_of(ref, lambda: self.list_rooms(principal))

    def delete_room(self, principal: str, room_id: str) -> int:
        """Delete a room the principal owns: its entries (through the one delete path), their feedback,
        its invites, its members and the room itself; returns how many entries went. Deleting is for
        the owner only; a member or a stranger is refused and nothing changes.

        Raises:
            Forbidden: not the owner, not a member, or no such room.
        """
        with self.transaction() as db:
            self.require_owner(principal, room_id, "delete it")
            bucket = self.room_bucket(principal, room_id)
            deleted = self.delete_set(db, bucket, reason="room_deleted")
            self.remember_members(db, room_id, bucket)
            db.execute("DELETE FROM feedback WHERE bucket = ?", (bucket,))
            db.execute("DELETE FROM invites WHERE room_id = ?", (room_id,))
            db.execute("DELETE FROM members WHERE room_id = ?", (room_id,))
            db.execute("DELETE FROM rooms WHERE room_id = ?", (room_id,))
        return deleted

    def create_invite(
        self, principal: str, room_id: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1
    ) -> Invite:
        """Create an invite to a room the principal owns; the code is returned once and stored hashed.

        Raises:
            ValidationError: scope, expiry (1–90 days) or uses (1–1000) out of range.
            Forbidden: not the owner, not a member, or no such room.
        """
        from mnemo_tui.values.rooms import Invite

        if scope not in ("read", "read_write"):
            raise ValidationError("invite scope is read or read_write")
        if isinstance(expires_days, bool) or not 1 <= expires_days <= 90:
            raise ValidationError("expires_in_days must be between 1 and 90")
        if isinstance(max_uses, bool) or not 1 <= max_uses <= 1000:
            raise ValidationError("max_uses must be between 1 and 1000")
        with self.transaction() as db:
            self.require_owner(principal, room_id, "invite")
            code = ids.invite_code()
            invite_id = "inv_" + ids.ulid()
            now = timefmt.now_us()
            expires = now + expires_days * DAY_US
            db.execute(
                "INSERT INTO invites(invite_id, room_id, code_hash, scope, expires_at, max_uses, created_by, created_at)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (invite_id, room_id, ids.digest(code), scope, expires, max_uses, principal, now),
            )
        return Invite(
            code=code, room_id=room_id, invite_id=invite_id, scope=scope, expires_at=expires, max_uses=max_uses
        )

    def join(self, principal: str, code: str) -> Joined:
        """Join a room by invite code; joining a room one is already in is a no-op success.

        Raises:
            NotFound: an unknown code.
            Conflict: a code used up or expired.
        """
        from mnemo_tui.values.rooms import Joined

        if not isinstance(code, str) or not code.startswith("mnvr_") or len(code) > 200:
            raise NotFound("unknown invite code")
        with self.transaction() as db:
            row = db.execute(
                "SELECT i.invite_id, i.room_id, i.scope, i.expires_at, i.max_uses, i.uses, r.name, i.code_hash "
                "FROM invites i JOIN rooms r ON r.room_id = i.room_id WHERE i.code_hash = ?",
                (ids.digest(code),),
            ).fetchone()
            if row is None or not compare_digest(row[7], ids.digest(code)):
                raise NotFound("unknown invite code")
            invite_id, room_id, scope, expires, max_uses, uses, name, _ = row
            member = db.execute(
                "SELECT scope FROM members WHERE room_id = ? AND principal = ?", (room_id, principal)
            ).fetchone()
            if member is not None:
                return Joined(room_id=room_id, name=name, scope=member[0], already_member=True)
            if expires < timefmt.now_us():
                raise Conflict("this invite has expired")
            if uses >= max_uses:
                raise Conflict("this invite has been used up")
            # Conditional, so two joins on two servers at once can never pass `max_uses` between them.
            taken = db.execute(
                "UPDATE invites SET uses = uses + 1 WHERE invite_id = ? AND uses < max_uses", (invite_id,)
            ).rowcount
            if taken == 0:
                raise Conflict("this invite has been used up")
            db.execute(
                "INSERT INTO members(room_id, principal, role, scope, joined_at) VALUES (?,?,'member',?,?)",
                (room_id, principal, scope, timefmt.now_us()),
            )
        return Joined(room_id=room_id, name=name, scope=scope, already_member=False)
