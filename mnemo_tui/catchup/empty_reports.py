"""Provides empty reports: what an empty answer covered, naming the rooms an unscoped read did not search."""

from __future__ import annotations

from collections.abc import Callable

from mnemo_tui import sanitize, timefmt
from mnemo_tui.backends import Backend
from mnemo_tui.limits import describe_scope, room_of
from mnemo_tui.values.model import EmptyKind, EmptyReport, RecentQuery, RoomRef, Watermark


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def unsearched_rooms(backend: Backend) -> tuple[RoomRef, ...]:
    """Every room the reader belongs to: what an unscoped read leaves out."""
    return tuple(RoomRef(name=r.name, address=r.address) for r in backend.rooms())


def build(
    backend: Backend,
    kind: EmptyKind,
    scope: str | None,
    *,
    watermark: Watermark | None = None,
    filters: Callable[[Callable[[str], str]], str] | None = None,
    subject: str | None = None,
) -> EmptyReport:
    """Build the empty report of one kind for one scope (rooms are named only for an unscoped read).

    `filters` writes mnemo's own text quoting each value with the quote it is given; the report is
    written twice from one set of lines: exact for the wire, and with every stored name (and every
    value the reader typed) made safe for a terminal, once.
    """
    rooms = unsearched_rooms(backend) if scope is None else ()
    room = room_names(backend).get(scope) if scope is not None and room_of(scope) is not None else None
    exact = _lines(kind, scope, rooms, watermark, filters(repr) if filters else "", subject, repr, lambda n: n, room)
    # Each value quoted by sanitize.quoted alone: repr's escapes sanitized again would read as typed backslashes.
    shown_filters = filters(sanitize.quoted) if filters else ""
    shown = _lines(kind, scope, rooms, watermark, shown_filters, subject, sanitize.quoted, sanitize.line, room)
    return EmptyReport(kind=kind, scope=scope, text=exact, unsearched_rooms=rooms, shown=shown)


def _lines(
    kind: EmptyKind,
    scope: str | None,
    rooms: tuple[RoomRef, ...],
    watermark: Watermark | None,
    filters: str,
    subject: str | None,
    quote: Callable[[str], str],
    name: Callable[[str], str],
    room: str | None = None,
) -> str:
    if subject:
        where = name(subject)
    elif room is not None and scope is not None:
        where = f"room {quote(room)} ({name(scope)})"  # the name beside the id a person cannot read
    else:
        where = describe_scope(scope, quote)
    if kind == "empty_scope":
        first = f"{_capitalised(where)} holds no entries yet."
    elif kind == "nothing_new":
        since = timefmt.to_iso(watermark.created_at) if watermark and watermark.created_at is not None else "?"
        who = f" (consumer {quote(watermark.consumer)})" if watermark else ""
        first = f"Nothing new in {where} since your watermark {since}{who}."
    elif kind == "no_match":
        first = f"Nothing in {where} matches {filters or 'these filters'}; the scope itself is not empty."
    else:
        first = f"Nothing further in {where} past this cursor: the walk has reached the end of the feed."
    lines = [first]
    if scope is None:
        if rooms:
            noun = "room" if len(rooms) == 1 else f"{len(rooms)} rooms"
            lines.append(f"Shared rooms are separate stores; this read did not search your {noun}:")
            names = [name(r.name) for r in rooms]
            width = max(len(n) for n in names)
            # An address comes from the endpoint too: shown through the same sanitizer as a name.
            lines += [f"  - {n.ljust(width)}  {name(r.address)}" for n, r in zip(names, rooms, strict=True)]
            if len(rooms) == 1:
                lines.append(f"Re-run with --scope {name(rooms[0].address)} to read it.")
            else:
                lines.append("Re-run with --scope set to one of these addresses to read it.")
        else:
            lines.append("You belong to no shared rooms, so no room went unsearched.")
    return "\n".join(lines)


def room_names(backend: Backend) -> dict[str, str]:
    """The reader's rooms by address: their names, to show beside the ids (empty if the list cannot be read)."""
    from mnemo_tui.errors import MnemoError

    try:
        return {r.address: r.name for r in backend.rooms()}
    except MnemoError:
        return {}


def describe_filters(query: RecentQuery, quote: Callable[[str], str] = repr) -> str:
    """The time and author filters of a read, in words, each author quoted by `quote`."""
    parts = []
    if query.since is not None:
        parts.append(f"since {timefmt.to_iso(query.since)}")
    if query.until is not None:
        parts.append(f"until {timefmt.to_iso(query.until)}")
    if query.exclude_author is not None:
        parts.append(f"excluding author {quote(query.exclude_author)}")
    if query.author is not None:
        parts.append(f"by author {quote(query.author)}")
    return ", ".join(parts)


def for_recent(backend: Backend, query: RecentQuery) -> EmptyReport:
    """The empty report of an empty `recent` page: past the cursor, no match, or an empty scope."""
    if query.cursor is not None:
        return build(backend, "past_cursor", query.scope)
    filtered = any(v is not None for v in (query.since, query.until, query.exclude_author, query.author))
    if filtered and backend.recent(RecentQuery(scope=query.scope, limit=1, include_history=True)).items:
        return build(backend, "no_match", query.scope, filters=lambda quote: describe_filters(query, quote))
    return build(backend, "empty_scope", query.scope)


def for_search(
    backend: Backend, query: str, scope: str | None, *, since: str | None = None, until: str | None = None
) -> EmptyReport:
    """What an empty search covered: the scope and query, and (unscoped) the rooms it did not search.

    `since` and `until` are named as the reader gave them.
    """

    def filters(quote: Callable[[str], str]) -> str:
        return f"the query {quote(query)}" + "".join(
            f" {flag} {value}" for flag, value in (("since", since), ("until", until)) if value is not None
        )

    if backend.recent(RecentQuery(scope=scope, limit=1, include_history=True)).items:
        return build(backend, "no_match", scope, filters=filters)
    return build(backend, "empty_scope", scope)


def for_catchup(backend: Backend, scope: str | None, watermark: Watermark | None, since: int | None) -> EmptyReport:
    """The empty report of a catch-up pass that delivered nothing."""
    if watermark is not None and watermark.created_at is not None:
        return build(backend, "nothing_new", scope, watermark=watermark)
    if since is not None and backend.recent(RecentQuery(scope=scope, limit=1)).items:
        return build(backend, "no_match", scope, filters=lambda _quote: f"since {timefmt.to_iso(since)}")
    return build(backend, "empty_scope", scope)


# `--scope all` reads the own domain of that name; one who types it wants every scope: said before the read.
ALL = "all"
ALL_SCOPES_NOTE = (
    "(Your own store has no domain {0}: this reads that empty domain. For your own store and every room "
    "in one pass: mnemo catchup --all-scopes; omit --scope for your own store alone)"
)


def scope_by_name(backend: Backend, scope: str | None) -> tuple[str | None, str | None]:
    """The scope a read means, and a note for the person when it is not the one typed.

    `--scope NAME` where the own store has no domain NAME but exactly one of the reader's rooms is
    named NAME reads that room (a domain of that name, once it holds an entry, wins). A room
    address or the own store is read as given.
    """
    if scope is None or room_of(scope) is not None:
        return scope, None
    if backend.recent(RecentQuery(scope=scope, limit=1, include_history=True)).items:
        return scope, None
    rooms = [r for r in backend.rooms() if r.name == scope]
    if not rooms and scope.casefold() == ALL:
        return scope, ALL_SCOPES_NOTE.format(sanitize.quoted(scope))
    if len(rooms) != 1:
        return scope, None
    address = rooms[0].address
    return address, (
        f"(Your own store has no domain {sanitize.quoted(scope)}: reading your room of that name, "
        f"--scope {sanitize.line(address)})"
    )


def scope_hints(backend: Backend, report: EmptyReport) -> list[str]:
    """What to say under an empty own-domain read: rooms of that name, or the nearest names that exist."""
    scope = report.scope
    if report.kind != "empty_scope" or scope is None or room_of(scope) is not None:
        return []
    if scope.casefold() == ALL:
        return []  # `scope_by_name` said it before the read
    rooms = backend.rooms()
    named = [r for r in rooms if r.name == scope]
    if named:
        return [
            f"(You belong to a room named {sanitize.quoted(scope)}: read it with --scope {sanitize.line(r.address)})"
            for r in named
        ]
    import difflib

    names = {d: d for d in backend.domains()}
    names.update({r.name: r.address for r in rooms if r.name not in names})
    # Compared without case (`--scope CI` finds domain `ci`, as `cii` does); the name shown as it is spelled.
    folded: dict[str, str] = {}
    for known in names:
        folded.setdefault(known.casefold(), known)
    near = [folded[n] for n in difflib.get_close_matches(scope.casefold(), list(folded), n=1, cutoff=0.6)]
    if not near:
        return []
    target = names[near[0]]
    which = "room" if room_of(target) is not None else "domain"
    import shlex  # the suggestion is pasted: a domain with a space is one shell word (as the author hint's)

    return [f"(Did you mean {which} {sanitize.quoted(near[0])}? --scope {sanitize.line(shlex.quote(target))})"]
