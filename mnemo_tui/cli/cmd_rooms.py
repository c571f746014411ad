"""Provides the rooms commands."""

from __future__ import annotations

from typing import Annotated

import typer

from mnemo_tui import sanitize as safe
from mnemo_tui.cli import output, terminal
from mnemo_tui.cli.commands import TableFormat, Yes, ctx_of, group
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.limits import ROOM_PREFIX, parse_scope
from mnemo_tui.values.rooms import room_id_of

rooms = group("rooms", "Shared rooms: list, create, invite, join, delete.")


@rooms.command("list")
def rooms_list(
    ctx: typer.Context,
    fmt: TableFormat = "table",
) -> None:
    """The rooms you belong to."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    rooms = c.backend.rooms()
    output.listing(
        fmt,
        [r.wire() for r in rooms],
        empty="You belong to no rooms yet. Create one with `mnemo rooms create NAME`.",
        headers=["NAME", "ADDRESS", "ROLE", "ACCESS"],
        rows=[[r.name, r.address, r.role, r.scope + (" (archived)" if r.archived else "")] for r in rooms],
        flex=0,
    )


@rooms.command("create")
def rooms_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The room's name (unique among your rooms).")],
    description: Annotated[
        str | None, typer.Option("--description", metavar="TEXT", help="What the room is for.")
    ] = None,
    fmt: TableFormat = "table",
) -> None:
    """Create a room; prints its xroom: address."""
    c = ctx_of(ctx, creates_store=True)
    output.check_format(fmt, allow_ndjson=False)
    room = c.backend.create_room(name, description)
    output.document_or_line(
        fmt, room.created(f"Invite members with `mnemo rooms invite {room.address}`."), room.address
    )


@rooms.command("invite")
def rooms_invite(
    ctx: typer.Context,
    room: Annotated[str, typer.Argument(metavar="ROOM", help="Room address, id or name.")],
    read_only: Annotated[bool, typer.Option("--read-only", help="Invitees may read but not write.")] = False,
    max_uses: Annotated[
        int, typer.Option("--max-uses", metavar="N", help="How many joins the code allows, 1-1000.")
    ] = 1,
    expires_days: Annotated[
        int, typer.Option("--expires-days", metavar="N", help="Days the code stays valid, 1-90.")
    ] = 7,
    fmt: TableFormat = "table",
) -> None:
    """Create an invite code (owner only); prints the mnvr_ code once."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    if room.startswith("xroom:"):
        parse_scope(room)  # a malformed address is a usage error (2), as for every scope
    if not 1 <= max_uses <= 1000:
        raise ValidationError(f"--max-uses must be between 1 and 1000, got {max_uses}")
    if not 1 <= expires_days <= 90:
        raise ValidationError(f"--expires-days must be between 1 and 90, got {expires_days}")
    invite = c.backend.invite(
        room,
        scope="read" if read_only else "read_write",
        expires_days=expires_days,
        max_uses=max_uses,
    )
    output.document_or_line(fmt, invite.wire(), invite.code)


@rooms.command("join")
def rooms_join(
    ctx: typer.Context,
    code: Annotated[str, typer.Argument(metavar="CODE", help="The mnvr_ invite code.")],
    fmt: TableFormat = "table",
) -> None:
    """Join a room by invite code; prints its address."""
    c = ctx_of(ctx, creates_store=True)
    output.check_format(fmt, allow_ndjson=False)
    joined = c.backend.join(code.strip())
    output.document_or_line(fmt, joined.wire(f"Read it with `mnemo recent --scope {joined.address}`."), joined.address)


@rooms.command("delete", short_help="Delete a room you own, with its entries (asks first, or --yes).")
def rooms_delete(
    ctx: typer.Context,
    room: Annotated[str, typer.Argument(metavar="ROOM", help="Room address, id or name.")],
    yes: Yes = False,
    fmt: TableFormat = "table",
) -> None:
    """Delete a room you own, with its entries, invites and members (asks on a terminal; elsewhere needs --yes).

    Members lose it too: afterwards its address reads as a room one is not a member of. On an
    endpoint this needs `DELETE /memory/rooms/{id}`, which `mnemo serve` has and the hosted plane has not.
    """
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    if room.startswith("xroom:"):
        parse_scope(room)
    terminal.may_ask(yes, "mnemo rooms delete")
    backend = c.backend
    ref = room
    if not yes:
        rooms = backend.rooms()  # listed once: for the name, the role and the question
        ref = room_id_of(room, lambda: rooms)
        found = next((r for r in rooms if r.room_id == ref), None)
        if found is not None and found.role != "owner":
            raise Forbidden("only the room's owner can delete it")
        name = safe.line(found.name) if found is not None else ref
        if not terminal.confirmed(f"Delete room {name} ({ROOM_PREFIX}{ref}) and every entry in it?"):
            output.hint("nothing deleted")
            return
    room_id, deleted = backend.delete_room(ref)
    noun = "entry" if deleted == 1 else "entries"
    output.document_or_line(
        fmt,
        {"room_id": room_id, "address": ROOM_PREFIX + room_id, "deleted": deleted, "status": "deleted"},
        f"deleted room {ROOM_PREFIX}{room_id} and its {deleted} {noun}",
    )
