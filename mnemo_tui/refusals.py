"""Provides the rules of acting on entries that every front end applies: what may be deleted, revised or written where.

The engine refuses what breaks its contract (a room entry that supersedes, a revision already
superseded, a write by a read-only member); these rules say so *before* asking, in one place, so
the CLI's `delete` and the TUI's `d`, `e` and `w` refuse the same things with the same words.
"""

from __future__ import annotations

from mnemo_tui import sanitize
from mnemo_tui.limits import room_of
from mnemo_tui.model import Entry
from mnemo_tui.values.rooms import Room


def delete_refusal(entry: Entry) -> str | None:
    """Why an entry may not be deleted by its reader (None: it may): only one's own entries are deleted."""
    if room_of(entry.domain):
        return (
            f"{entry.atom_id} is an entry of room {sanitize.line(entry.domain)}: delete removes your own entries only"
        )
    return None


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

    A name is never resolved to a room for a write, as it is for a read (CLI.md's scope syntax): private
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
