"""Provides the rules of acting on entries that every front end applies: what may be deleted, revised or written where.

The engine refuses what breaks its contract (a room entry that supersedes, a revision already
superseded, a write by a read-only member); these rules say so *before* asking, in one place, so
the CLI's `delete` and the TUI's `d`, `e` and `w` refuse the same things with the same words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui import sanitize
from mnemo_tui.errors import Forbidden, NotFound
from mnemo_tui.limits import ROOM_DELETE_RULE, room_of
from mnemo_tui.values.model import Entry

if TYPE_CHECKING:
    from mnemo_tui.backends import Backend
    from mnemo_tui.values.rooms import Room


def delete_refusal(entry: Entry, rooms: list[Room] | None = None, me: str | None = None) -> str | None:
    """Why an entry may not be deleted by its reader (None: it may, or only the store can tell).

    One's own entries; a room entry by its author while a read_write member, any by the room's owner
    (`ROOM_DELETE_RULE`, our extension; the store decides it again in its delete statement). `rooms` are
    the reader's rooms; `me` its principal where the front end knows it (`reader_principal`), else the
    author is left to the store.
    """
    room_id = room_of(entry.domain)
    room = next((r for r in rooms or [] if r.room_id == room_id), None)
    if room_id is None or room is None or room.role == "owner":
        return None
    author = entry.provenance.get("principal")
    if room.scope != "read_write" or (me is not None and author != me):
        return f"{entry.atom_id} is an entry of room {sanitize.line(room.name)} by {sanitize.line(entry.author)}: {ROOM_DELETE_RULE}"
    return None


def reader_principal(backend: Backend) -> str | None:
    """The reader's principal as entries' provenance names it, where the front end knows it: an embedded
    store's (an endpoint's principal is the client's own name for its key, not the server's)."""
    return backend.principal if backend.kind == "embedded" else None


def delete_entry(backend: Backend, entry: Entry) -> bool:
    """Delete an entry the reader has read: True when it went, False when it was already gone.

    Raises:
        Forbidden: the store refused; or an endpoint without our extension (the hosted service) kept a room entry.
    """
    if backend.delete(entry.atom_id):
        return True
    if room_of(entry.domain) is None:
        return False
    try:
        backend.get(entry.atom_id)
    except NotFound:
        return False
    raise Forbidden(
        f"{entry.atom_id} is still in its room: {sanitize.line(backend.identity)} does not delete room entries "
        "(the hosted service keeps them; `mnemo serve` lets their author or the room's owner delete them)"
    )


def revise_refusal(entry: Entry) -> str | None:
    """Why an entry may not be superseded by a new revision (None: it may)."""
    if room_of(entry.domain):
        return f"{entry.atom_id[:8]} is a room entry: room entries cannot be superseded; write a new one instead"
    if entry.superseded_by:
        return (
            f"{entry.atom_id[:8]} is an old revision (superseded by {entry.superseded_by[:8]}): revise the newest one"
        )
    return None


def write_refusal(scope: str | None, rooms: list[Room], own_domains: list[str] | None = None) -> str | None:
    """Why the reader may not write into a scope (None: it may): a room it reads only, or does not belong to.

    A name is never resolved to a room for a write, as it is for a read (docs/cli.md's scope syntax): private
    text must not land in a shared room by a guess, nor a room's text in a new own domain by a typo. So a
    name that no own domain has (`own_domains`, when known) but a room of the reader's has is refused,
    naming the room's address.
    """
    room = room_of(scope) if scope else None
    if room is None:
        if scope is None or own_domains is None or scope in own_domains:
            return None
        named = next((r for r in rooms if r.name == scope), None)
        if named is None:
            return None
        return (
            f"your own store has no domain {sanitize.quoted(scope)}, but you belong to a room of that name; "
            f"a write never guesses a room: to write there, use --scope {sanitize.line(named.address)}"
        )
    found = next((r for r in rooms if r.room_id == room), None)
    if found is None:
        return f"you are not a member of room {sanitize.line(scope or '')}"
    if found.scope != "read_write":
        return f"you are a read-only member of room {sanitize.line(found.name)}: nothing is written there"
    return None


def target_domain(scope: str | None) -> str:
    """Where a new entry written "into the current scope" goes: the own store's default domain, or the scope."""
    return "general" if scope is None else scope
