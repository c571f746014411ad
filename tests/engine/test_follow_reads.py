"""The push follow's engine reads on both engines: a scope's position (its bucket's clock, with the feed's access
rule; a deleted room's former member still reads it) and its entries after a position, oldest first."""

from __future__ import annotations

import pytest

from mnemo_tui.errors import Forbidden
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.targets import Target


def test_position_is_the_bucket_clock_under_the_feeds_access_rule(target: Target) -> None:
    engine = target.open()
    try:
        assert engine.position("alice", None) == (0, True, None)  # no bucket yet
        assert engine.position("alice", "work") == (0, True, None)
        first = engine.write("alice", WriteRequest(content="a", domain="work"))
        created = engine.get("alice", first.atom_id).created_at
        last, member, own = engine.position("alice", None)
        assert (last, member) == (created, True) and own is not None
        assert engine.position("alice", "idle") == (created, True, own)  # a domain moves with its bucket
        assert engine.delete("alice", first.atom_id) == 1
        removed = engine.removals("alice", None, created).items[0].removed_at
        assert removed > created and engine.position("alice", "work") == (removed, True, own)

        room = engine.create_room("alice", "team")
        address = room.address
        invite = engine.create_invite("alice", room.room_id)
        engine.join("bob", invite.code)
        said = engine.write("bob", WriteRequest(content="hi", domain=address))
        at = engine.get("bob", said.atom_id).created_at
        mine = engine.position("bob", address)
        assert mine[:2] == (at, True) and mine[2] not in (None, own)
        assert engine.bucket_clocks([own, mine[2], 10**9]) == {own: removed, mine[2]: at}  # one read for many
        assert engine.bucket_clocks([]) == {}
        with pytest.raises(Forbidden):
            engine.position("carol", address)  # a stranger: the feed's answer
        engine.delete_room("alice", room.room_id)
        last, member, room_bucket = engine.position("bob", address)  # a former member: the removals are his
        assert last > at and member is False and room_bucket == mine[2]
        with pytest.raises(Forbidden):
            engine.position("carol", address)
    finally:
        engine.close()


def test_entries_after_are_oldest_first_filtered_and_bounded(target: Target) -> None:
    engine = target.open()
    try:
        ids = [
            engine.write("alice", WriteRequest(content=f"n{i}", domain="d" if i % 2 else "e")).atom_id for i in range(7)
        ]
        times = [engine.get("alice", i).created_at for i in ids]
        every = RecentQuery()
        got = engine.entries_after("alice", every, times[1], times[5], 100)[0]
        assert [t for t, _ in got] == times[2:6]  # (after, upto], oldest first
        assert engine.entries_after("alice", every, 0, times[-1], 3)[0] == got_first(engine, times, 3)
        odd = engine.entries_after("alice", RecentQuery(scope="d"), 0, times[-1], 100)[0]
        assert [t for t, _ in odd] == times[1::2]
        assert engine.entries_after("bob", every, 0, times[-1], 100)[0] == []  # another's store reads nothing
        replaced = engine.write("alice", WriteRequest(content="v2", domain="e", supersedes=(ids[0],)))
        last = engine.get("alice", replaced.atom_id).created_at
        current = [t for t, _ in engine.entries_after("alice", every, 0, last, 100)[0]]
        assert times[0] not in current and last in current  # the replaced version is history
        history = engine.entries_after("alice", RecentQuery(include_history=True), 0, last, 100)[0]
        assert any(t == times[0] and '"superseded_by"' in wire for t, wire in history)
    finally:
        engine.close()


def got_first(engine: object, times: list[int], n: int) -> list[tuple[int, str]]:
    rows = engine.entries_after("alice", RecentQuery(), 0, times[-1], 100)[0]  # type: ignore[attr-defined]
    return list(rows[:n])
