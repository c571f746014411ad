"""The embedded store's id-prefix lookup: one indexed range query, restricted to what the principal may read."""

from __future__ import annotations

from mnemo_tui.engine.atoms import BY_PREFIX
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest


def test_prefix_lookup_is_a_range_on_the_unique_index(store: Store) -> None:
    with store.reading() as db:
        plan = " ".join(
            str(row[-1])
            for row in db.execute("EXPLAIN QUERY PLAN " + BY_PREFIX, ("abcdef", "abcdeg", "local", "local", 6))
        )
    assert "atom_id>? AND atom_id<?" in plan.replace("=", "") and "USING INDEX" in plan, plan


def test_prefix_lookup_sees_own_entries_and_rooms_one_belongs_to(store: Store) -> None:
    mine = store.write("alice", WriteRequest("mine", "general")).atom_id
    theirs = store.write("bob", WriteRequest("theirs", "general")).atom_id
    room = store.create_room("bob", "team")
    shared = store.write("bob", WriteRequest("shared", f"xroom:{room.room_id}")).atom_id
    assert [e.atom_id for e in store.by_prefix("alice", mine[:6])] == [mine]
    assert store.by_prefix("alice", theirs[:6]) == [] or theirs[:6] == mine[:6]
    assert store.by_prefix("alice", shared[:6]) == [] or shared[:6] == mine[:6]
    assert [e.atom_id for e in store.by_prefix("bob", shared[:8])] == [shared]
    assert store.by_prefix("alice", "not hex") == []
