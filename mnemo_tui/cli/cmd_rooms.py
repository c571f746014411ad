"""Provides the rooms commands."""

from __future__ import annotations

from mnemo_tui import text as safe
from mnemo_tui.cli import output
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.options import Args, flag, number, required_argument, table_format_opt, text
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.model import ROOM_PREFIX, parse_scope, room_id_of


class RoomsListArgs(Args):
    """The rooms you belong to."""

    fmt = table_format_opt()


def rooms_list(c: Context, args: RoomsListArgs) -> None:
    output.check_format(args.fmt, allow_ndjson=False)
    rooms = c.backend.rooms()
    output.listing(
        args.fmt,
        [r.wire() for r in rooms],
        empty="You belong to no rooms yet. Create one with `mnemo rooms create NAME`.",
        headers=["NAME", "ADDRESS", "ROLE", "ACCESS"],
        rows=[[r.name, r.address, r.role, r.scope + (" (archived)" if r.archived else "")] for r in rooms],
        flex=0,
    )


class RoomsCreateArgs(Args):
    """Create a room; prints its xroom: address."""

    creates_store = True

    name = required_argument("NAME", "The room's name (unique among your rooms).")
    description = text("--description", metavar="TEXT", help="What the room is for.")
    fmt = table_format_opt()


def rooms_create(c: Context, args: RoomsCreateArgs) -> None:
    output.check_format(args.fmt, allow_ndjson=False)
    room = c.backend.create_room(args.name, args.description)
    output.document_or_line(
        args.fmt, room.created(f"Invite members with `mnemo rooms invite {room.address}`."), room.address
    )


class RoomsInviteArgs(Args):
    """Create an invite code (owner only); prints the mnvr_ code once."""

    room = required_argument("ROOM", "Room address, id or name.")
    read_only = flag("--read-only", help="Invitees may read but not write.")
    max_uses = number("--max-uses", metavar="N", help="How many joins the code allows, 1-1000.", default=1)
    expires_days = number("--expires-days", metavar="N", help="Days the code stays valid, 1-90.", default=7)
    fmt = table_format_opt()


def rooms_invite(c: Context, args: RoomsInviteArgs) -> None:
    output.check_format(args.fmt, allow_ndjson=False)
    if args.room.startswith("xroom:"):
        parse_scope(args.room)  # a malformed address is a usage error (2), as for every scope
    if not 1 <= args.max_uses <= 1000:
        raise ValidationError(f"--max-uses must be between 1 and 1000, got {args.max_uses}")
    if not 1 <= args.expires_days <= 90:
        raise ValidationError(f"--expires-days must be between 1 and 90, got {args.expires_days}")
    invite = c.backend.invite(
        args.room,
        scope="read" if args.read_only else "read_write",
        expires_days=args.expires_days,
        max_uses=args.max_uses,
    )
    output.document_or_line(args.fmt, invite.wire(), invite.code)


class RoomsDeleteArgs(Args):
    """Delete a room you own, with its entries, invites and members (asks on a terminal; elsewhere needs --yes).

    Members lose it too: afterwards its address reads as a room one is not a member of. On an
    endpoint this needs `DELETE /memory/rooms/{id}`, which `mnemo serve` has and the hosted plane has not.
    """

    summary = "Delete a room you own, with its entries (asks first, or --yes)."
    room = required_argument("ROOM", "Room address, id or name.")
    yes = flag("--yes", "-y", help="Delete without asking (required when stdin is not a terminal).")
    fmt = table_format_opt()


def rooms_delete(c: Context, args: RoomsDeleteArgs) -> None:
    output.check_format(args.fmt, allow_ndjson=False)
    if args.room.startswith("xroom:"):
        parse_scope(args.room)
    output.may_ask(args.yes, "mnemo rooms delete")
    backend = c.backend
    ref = args.room
    if not args.yes:
        rooms = backend.rooms()  # listed once: for the name, the role and the question
        ref = room_id_of(args.room, lambda: rooms)
        room = next((r for r in rooms if r.room_id == ref), None)
        if room is not None and room.role != "owner":
            raise Forbidden("only the room's owner can delete it")
        name = safe.line(room.name) if room is not None else ref
        if not output.confirmed(f"Delete room {name} ({ROOM_PREFIX}{ref}) and every entry in it?"):
            output.hint("nothing deleted")
            return
    room_id, deleted = backend.delete_room(ref)
    noun = "entry" if deleted == 1 else "entries"
    output.document_or_line(
        args.fmt,
        {"room_id": room_id, "address": ROOM_PREFIX + room_id, "deleted": deleted, "status": "deleted"},
        f"deleted room {ROOM_PREFIX}{room_id} and its {deleted} {noun}",
    )


class RoomsJoinArgs(Args):
    """Join a room by invite code; prints its address."""

    creates_store = True

    code = required_argument("CODE", "The mnvr_ invite code.")
    fmt = table_format_opt()


def rooms_join(c: Context, args: RoomsJoinArgs) -> None:
    output.check_format(args.fmt, allow_ndjson=False)
    joined = c.backend.join(args.code.strip())
    output.document_or_line(
        args.fmt, joined.wire(f"Read it with `mnemo recent --scope {joined.address}`."), joined.address
    )
