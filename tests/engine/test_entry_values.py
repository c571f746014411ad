"""`Entry` is a tuple `(created_at, atom_id, wire)` built from the engines' rows: every read gives exactly those
three fields, equal to the entry made from them by name, with the wire item parsed once."""

from __future__ import annotations

import json
from pathlib import Path

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.model import Entry, RecentQuery
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest


def _same_fields(entry: Entry) -> None:
    assert type(entry) is Entry and len(entry) == 3
    created_at, atom_id, wire = entry
    assert (entry.created_at, entry.atom_id, entry.wire) == (created_at, atom_id, wire)
    assert isinstance(created_at, int) and isinstance(atom_id, str) and isinstance(wire, str)
    assert entry == Entry.of(atom_id=atom_id, created_at=created_at, wire=wire)
    assert hash(entry) == hash(Entry.of(atom_id, created_at, wire))
    data = entry.data
    assert data == json.loads(wire) and data["atom_id"] == atom_id
    assert entry.data is data  # parsed once
    assert entry == (created_at, atom_id, wire)  # the cache is outside equality


def test_every_read_of_entries_gives_the_three_fields_of_an_entry(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    try:
        first = store.write("alice", WriteRequest(content="first fact about otters", domain="d"))
        later = store.write(
            "alice", WriteRequest(content="later fact about otters", domain="d", supersedes=(first.atom_id,))
        )
        for i in range(5):
            store.write("alice", WriteRequest(content=f"entry {i}", domain="d", fingerprint="fp"))
        pages = [
            store.recent("alice", RecentQuery(limit=2)),
            store.recent("alice", RecentQuery(limit=3, include_history=True)),  # superseded_by spliced in
        ]
        pages.append(store.recent("alice", RecentQuery(limit=2, cursor=pages[0].next_cursor)))
        entries = [e for page in pages for e in page.items]
        entries += [hit.entry for hit in store.search("alice", SearchQuery(query="otters"))]
        entries += [store.get("alice", first.atom_id), *store.by_prefix("alice", first.atom_id[:4])]
        entries += [revision.entry for revision in store.chain("alice", later.atom_id).revisions]
        entries += store.by_fingerprint("alice", None, "fp")
        assert len(entries) >= 16
        for entry in entries:
            _same_fields(entry)
        history = {e.atom_id: e for e in pages[1].items}
        assert store.get("alice", first.atom_id).superseded_by == later.atom_id
        assert first.atom_id not in history or history[first.atom_id].superseded_by == later.atom_id
    finally:
        store.close()


def test_an_entry_shows_its_fields_by_name() -> None:
    entry = Entry.of(atom_id="0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b", created_at=5, wire='{"content":"x"}')
    assert repr(entry) == (
        "Entry(atom_id='0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b', created_at=5, wire='{\"content\":\"x\"}')"
    )
    assert entry.content == "x" and entry.first_line == "x"
