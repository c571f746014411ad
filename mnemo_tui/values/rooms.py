"""Provides the values of rooms: a room, an invite (created, and as its owner lists it), a join."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.limits import ROOM_ID, ROOM_PREFIX
from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Literal


class Room(Value):
    """A room the reader belongs to (wire `RoomListItem`)."""

    room_id: str
    name: str
    role: Literal["owner", "member"]
    scope: Literal["read", "read_write"]
    archived: bool = False

    @property
    def address(self) -> str:
        return ROOM_PREFIX + self.room_id

    def wire(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "name": self.name,
            "address": self.address,
            "role": self.role,
            "scope": self.scope,
            "archived": self.archived,
        }

    def created(self, next_steps: str) -> dict[str, Any]:
        """The wire `RoomCreated` of a room just created."""
        return {"room_id": self.room_id, "address": self.address, "name": self.name, "next_steps": next_steps}


def room_id_of(ref: str, rooms: Callable[[], list[Room]]) -> str:
    """A room id from an address, an id, or the name of one of the reader's `rooms` (listed only then).

    Raises:
        Forbidden: no room of that name among them (an unknown room reads like a foreign one).
        ValidationError: several of them bear that name.
    """
    room_id = ref[len(ROOM_PREFIX) :] if ref.startswith(ROOM_PREFIX) else ref
    if ROOM_ID.match(room_id):
        return room_id
    matches = [r for r in rooms() if r.name == ref]
    if len(matches) == 1:
        return matches[0].room_id
    if len(matches) > 1:
        raise ValidationError(f"several of your rooms are named {ref!r}; use the xroom: address")
    raise Forbidden(f"you are not a member of a room {ref!r} (or it does not exist)")


class Invite(Value):
    """A created invite (wire `InviteCreated`); the code is shown once."""

    code: str
    room_id: str
    invite_id: str
    scope: str
    expires_at: int
    max_uses: int

    @property
    def room_address(self) -> str:
        return ROOM_PREFIX + self.room_id

    def wire(self) -> dict[str, Any]:
        """The wire `InviteCreated` (there is no landing page of our own: `join_url` is empty)."""
        return {
            "invite_id": self.invite_id,
            "code": self.code,
            "room_address": self.room_address,
            "scope": self.scope,
            "expires_at": timefmt.to_iso(self.expires_at),
            "join_url": "",
            "share_message": (
                f"You are invited to the room {self.room_address}. Invite code: {self.code}. Join it with "
                f"`mnemo rooms join {self.code}`, or from an MCP client with the memory_join_room tool "
                f'(code "{self.code}").'
            ),
        }


class InviteInfo(Value):
    """An invite as its room's owner lists it (wire `InviteInfoSchema`): audit fields, never the code."""

    invite_id: str
    scope: str
    max_uses: int
    uses: int
    expires_at: int
    created_at: int

    def wire(self) -> dict[str, Any]:
        return {
            "invite_id": self.invite_id,
            "scope": self.scope,
            "max_uses": self.max_uses,
            "uses": self.uses,
            "expires_at": timefmt.to_iso(self.expires_at),
            "revoked_at": None,
            "created_at": timefmt.to_iso(self.created_at),
        }


class Joined(Value):
    """The answer to joining a room (wire `JoinedRoom`)."""

    room_id: str
    name: str
    scope: str
    already_member: bool

    @property
    def address(self) -> str:
        return ROOM_PREFIX + self.room_id

    def wire(self, next_steps: str) -> dict[str, Any]:
        """The wire `JoinedRoom`."""
        return {
            "room_id": self.room_id,
            "address": self.address,
            "name": self.name,
            "scope": self.scope,
            "already_member": self.already_member,
            "next_steps": next_steps,
        }
