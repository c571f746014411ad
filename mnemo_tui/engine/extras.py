"""Provides engine reads the server needs beyond `Store`: feed pages as wire texts, metadata and external refs."""

from __future__ import annotations

import json
from typing import Any

from mnemo_tui.engine import cursor as cursors
from mnemo_tui.engine.store import Store, with_superseded_by
from mnemo_tui.model import RecentQuery, room_of


def atom_extras(store: Store, atom_ids: list[str]) -> dict[str, tuple[dict[str, Any], str | None]]:
    """(metadata, external_ref) of each id; callers pass only ids the principal may already read."""
    if not atom_ids:
        return {}
    marks = ",".join("?" * len(atom_ids))
    with store._lock:
        rows = store.db.execute(
            f"SELECT atom_id, metadata, external_ref FROM atoms WHERE atom_id IN ({marks})", atom_ids
        ).fetchall()
    return {r[0]: (json.loads(r[1]) if r[1] else {}, r[2]) for r in rows}


def recent_wire(store: Store, principal: str, q: RecentQuery) -> tuple[list[str], str | None]:
    """One feed page as `Store.recent` reads it, but as wire texts: what the server sends, with no `Entry` built.

    Same statement, same cursor, same membership check as `Store.recent` (a test holds them equal).
    """
    q.validated()
    position = store._position(principal, q)
    sql, params = store._feed_sql(principal, q, position)
    room_id = room_of(q.scope)
    with store._lock:
        rows = store.db.execute(sql + " LIMIT ?", (*params, q.limit + 1)).fetchall()
        if not rows and room_id is not None:
            store._require_member(principal, room_id)
    more = len(rows) > q.limit
    rows = rows[: q.limit]
    wires = [r[2] if r[3] is None else with_superseded_by(r[2], r[3]) for r in rows]
    cursor = None
    if more:
        cursor = cursors.encode(store.secret, cursors.binding(principal, q), rows[-1][0], rows[-1][1])
    return wires, cursor
