"""Provides `export`: every readable entry and room of a backend as the export format (docs/export.md), streamed.

On an engine the entries come oldest first from one snapshot per scope. Over an endpoint the
feed is newest first, so each scope is walked by cursor into a spool file, page by page, and
read back from its last page to its first: memory stays flat (one offset per page is kept).
"""

from __future__ import annotations

import json
import tempfile
from array import array
from collections.abc import Callable, Generator
from contextlib import closing
from typing import TYPE_CHECKING

from mnemo_tui import portable
from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.walk import Walk
from mnemo_tui.engine.atoms import AtomOps
from mnemo_tui.engine.base import NOT_A_MEMBER
from mnemo_tui.engine.exchange import count_rows, export_line, export_rows, rooms_of
from mnemo_tui.errors import Forbidden, MnemoError
from mnemo_tui.limits import MAX_LIMIT, dumps, parse_scope, room_of
from mnemo_tui.values.model import RecentQuery, Value

if TYPE_CHECKING:
    from typing import Any


class Exported(Value):
    """What an export wrote: entries, rooms, the secrets it left out (None: the backend would not say), and
    the cursor an incremental export continues from."""

    entries: int
    rooms: int
    secrets_left_out: int | None
    cursor: str


def engine_of(backend: Backend) -> AtomOps | None:
    """The engine behind a backend in this process (the embedded store, PostgreSQL); None over an endpoint."""
    if isinstance(backend, LocalBackend) and isinstance(backend.engine, AtomOps):
        return backend.engine
    return None


def _remote_room(room: Any) -> dict[str, Any]:
    # An endpoint lists the caller's rooms without their owner, time or members: null, not a guess.
    return {
        "room_id": room.room_id,
        "name": room.name,
        "description": None,
        "owner": None,
        "created_at": None,
        "archived": room.archived,
        "members": None,
    }


def _secrets(backend: Backend) -> int | None:
    try:
        return len(backend.vault_list())
    except MnemoError:
        return None


def _remote_rows(
    backend: Backend, scope: str | None, since: int | None
) -> Generator[list[tuple[int, str, str]], None, None]:
    """A scope's entries oldest first over an endpoint: the feed walked newest first into a spool, read back."""
    with tempfile.TemporaryFile() as spool:
        offsets = array("q")
        query = RecentQuery(scope=scope, since=since, include_history=True, limit=MAX_LIMIT)
        # The one walk (a cursor that does not advance is BrokenFeed), streamed where the endpoint can.
        for page in Walk(backend, query).pages():
            rows = []
            for entry in reversed(page):
                # The feed carries no metadata or external_ref: one read of the entry whole each.
                detail = backend.detail(entry.atom_id)
                metadata = dumps(detail.metadata) if detail.metadata else None
                rows.append(
                    [entry.created_at, entry.atom_id, export_line(entry.wire, None, metadata, detail.external_ref)]
                )
            if rows:
                offsets.append(spool.tell())
                spool.write(dumps(rows).encode() + b"\n")
        for offset in reversed(offsets):
            spool.seek(offset)
            yield [(int(t), str(i), str(line)) for t, i, line in json.loads(spool.readline())]


def export(
    backend: Backend,
    write: Callable[[str], object],
    *,
    scope: str | None = None,
    since: int | None = None,
    cursor: str | None = None,
    progress: Callable[[int], None] | None = None,
    expect: Callable[[int], None] | None = None,
) -> Exported:
    """Write the export of `scope` (omitted: the own store and every room one belongs to) with `write`.

    `since` keeps entries at or after it; `cursor` (an earlier export's end line) keeps what came
    after that export in each scope. The vault is never read: only its count is reported. `progress` is
    told the running count; `expect` (on an engine, where it is cheap) the count the export will reach.

    Raises:
        ValidationError: a bad scope or cursor.
        Forbidden: a room one is not a member of.
    """
    marks = portable.Marks.decode(cursor) if cursor is not None else portable.Marks()
    engine = engine_of(backend)
    listed = backend.rooms() if scope is None or room_of(scope) else []
    scopes: list[str | None] = [parse_scope(scope)] if scope is not None else [None, *(r.address for r in listed)]
    wanted = {room_of(s) for s in scopes if s is not None and room_of(s)}
    if not wanted <= {r.room_id for r in listed}:  # refused before a line is written
        raise Forbidden(NOT_A_MEMBER)
    if engine is not None:
        rooms = [r for r in rooms_of(engine, backend.principal) if r["room_id"] in wanted]
    else:
        rooms = [_remote_room(r) for r in listed if r.room_id in wanted]
    write(portable.header(backend.kind, backend.identity, backend.principal, scopes, since) + "\n")
    for room in rooms:
        write(dumps({"room": room}) + "\n")
    starts = {one: marks.marks.get(portable.OWN if one is None else one) for one in scopes}
    lows = {one: since if mark is None else max(since or 0, mark[0]) for one, mark in starts.items()}
    if expect is not None and engine is not None:
        expect(sum(count_rows(engine, backend.principal, one, low) for one, low in lows.items()))
    count = 0
    for one in scopes:
        key = portable.OWN if one is None else one
        mark, low = starts[one], lows[one]
        held = frozenset(mark[1]) if mark is not None else frozenset()
        chunks = (
            export_rows(engine, backend.principal, one, low) if engine is not None else _remote_rows(backend, one, low)
        )
        with closing(chunks):  # a reader gone (`| head`) closes the stream while its store is still open
            for rows in chunks:
                lines = []
                for created_at, atom_id, line in rows:
                    if mark is not None and created_at == mark[0] and atom_id in held:
                        continue
                    marks.see(key, created_at, atom_id)
                    lines.append(line)
                if lines:
                    write("\n".join(lines) + "\n")
                    count += len(lines)
                    if progress is not None:
                        progress(count)
    secrets = _secrets(backend)
    result = Exported(count, len(rooms), secrets, marks.encode())
    end = {"entries": count, "rooms": len(rooms), "secrets_left_out": secrets, "cursor": result.cursor}
    write(dumps({"end": end}) + "\n")
    return result
