"""Who may delete a room entry is decided by the statement that deletes it, on both engines (issue 35, item 6)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mnemo_tui.errors import Forbidden
from mnemo_tui.values.writes import WriteRequest
from tests.support.targets import Target


@contextmanager
def statements(engine: Any, target: Target, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SQL statement the engine sends inside the block, in order."""
    sent: list[str] = []
    if target.engine == "sqlite":
        engine.db.set_trace_callback(sent.append)
        try:
            yield sent
        finally:
            engine.db.set_trace_callback(None)
        return
    from mnemo_tui.engine.postgres.pools import PgConnection

    execute = PgConnection.execute

    def recorded(self: PgConnection, sql: str, params: Any = ()) -> Any:
        sent.append(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(PgConnection, "execute", recorded)
    yield sent


def test_the_delete_statement_itself_reads_membership_role_and_author(
    targets: Callable[[str], Target], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No check-then-act: nothing reads `members` before the DELETE, which carries the whole rule; a refused
    delete changes nothing and only then says why."""
    target = targets("store")
    engine = target.open()
    try:
        room = engine.create_room("alice", "team")
        engine.join("bob", engine.create_invite("alice", room.room_id).code)
        by_alice = engine.write("alice", WriteRequest("alice's", room.address)).atom_id
        by_bob = engine.write("bob", WriteRequest("bob's", room.address)).atom_id
        with statements(engine, target, monkeypatch) as sent:
            assert engine.delete("bob", by_bob) == 1
        deletes = [i for i, s in enumerate(sent) if s.lstrip().upper().startswith("DELETE FROM ATOMS")]
        assert len(deletes) == 1, sent
        rule = sent[deletes[0]]
        assert "members" in rule and "role = 'owner'" in rule and "scope = 'read_write'" in rule
        assert "atoms.principal" in rule
        assert not [s for s in sent[: deletes[0]] if "members" in s or "rooms" in s], sent
        with statements(engine, target, monkeypatch) as sent, pytest.raises(Forbidden, match="only its author"):
            engine.delete("bob", by_alice)
        first = next(i for i, s in enumerate(sent) if "members" in s)
        assert sent[first].lstrip().upper().startswith("DELETE FROM ATOMS"), sent
        assert engine.get("alice", by_alice).atom_id == by_alice
    finally:
        engine.close()
