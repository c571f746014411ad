"""Provides what the server's detail and search answers add to an entry: its metadata and external reference."""

from __future__ import annotations

import json
from typing import Any

from mnemo_tui.engine.store import Store


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
