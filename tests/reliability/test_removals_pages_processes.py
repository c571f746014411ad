"""Deleters in their own processes while a consumer reads its removals a few at a time (issue 50): `catchup
--changes` over a real server, pages of 7, domain wipes larger than a page (all their tombstones at one
instant) and single deletes between passes; every removal is reported exactly once, on both engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo_tui.backends import remote_removals
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import Entry
from mnemo_tui.values.removals import Removal
from mnemo_tui.values.writes import WriteRequest
from tests.support.reliability import Passes
from tests.support.targets import Target
from tests.support.wire import served_store

SINGLES = 60  # entries of `notes` the first deleter deletes one by one
WIPES = 4  # domains of `BULK` entries each the second deleter wipes
BULK = 20  # more than a page: a wipe's instant is cut across pages
PAGE = 7

# Run after `Passes.start`'s opening (the target opened as `engine`, `wait_for_a_pass`); each waits for the
# consumer's next pass every few deletes, so the consumer reads while they delete.
_SINGLE = """
from mnemo_tui.values.model import RecentQuery
ids = [e.atom_id for e in engine.recent("alice", RecentQuery(scope="notes", limit=100)).items]
seen = passes_now()
for n, atom in enumerate(ids):
    assert engine.delete("alice", atom) == 1
    print(atom, flush=True)
    if n % 6 == 5:
        wait_for_a_pass(seen)
        seen = passes_now()
engine.close()
"""

_WIPER = """
seen = passes_now()
for n in range(int(sys.argv[4])):
    print(engine.delete_domain("alice", f"bulk{n}").deleted, flush=True)
    wait_for_a_pass(seen)
    seen = passes_now()
engine.close()
"""


def test_deleters_against_a_consumer_reading_removals_in_pages(
    target: Target, state: StateDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_removals, "PAGE", PAGE)
    engine = target.open()
    try:
        _key_id, key = engine.create_key("alice")
        for i in range(SINGLES):
            engine.write("alice", WriteRequest(content=f"note {i}", domain="notes"))
        for n in range(WIPES):
            for i in range(BULK):
                engine.write("alice", WriteRequest(content=f"bulk {n} {i}", domain=f"bulk{n}"))
    finally:
        engine.close()
    removed: list[Removal] = []
    passes = Passes(tmp_path / "passes")
    with served_store(target) as server:
        backend = RemoteBackend(server.url, key)
        try:

            def one_pass() -> None:
                CatchUp(backend, state, changes=True).run(_drop, removed=removed.extend)

            one_pass()  # the consumer's first pass: every entry, no removal yet
            assert removed == []
            deleters = [passes.start(_SINGLE, target), passes.start(_WIPER, target, str(WIPES))]
            count = passes.run(one_pass, deleters, most=500)
            outputs = [p.communicate(timeout=60) for p in deleters]
        finally:
            backend.close()
    for proc, (_out, err) in zip(deleters, outputs, strict=True):
        assert proc.returncode == 0, err
    singles = outputs[0][0].split()
    assert len(singles) == SINGLES and outputs[1][0].split() == [str(BULK)] * WIPES
    assert count > 2  # the consumer really read while they deleted
    ids = [r.atom_id for r in removed]
    assert len(ids) == len(set(ids)), "a removal was reported twice"
    assert len(ids) == SINGLES + WIPES * BULK, "a removal was lost"
    assert set(singles) <= set(ids)
    assert sorted(r.reason for r in removed) == sorted(["deleted"] * SINGLES + ["domain_wiped"] * WIPES * BULK)


def _drop(entries: list[Entry]) -> None:
    return None
