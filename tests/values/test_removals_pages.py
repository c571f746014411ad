"""Removals read a page at a time by every backend (issue 50): the local backend and the remote one page
the same window the same way, a server older than paging (no `next`) is one last page, and a server whose
pages do not move on is an error, never an endless read."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from mnemo_tui.backends import Backend, remote_removals
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.errors import Unavailable
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values import removals as removal_values
from mnemo_tui.values.model import Entry
from mnemo_tui.values.removals import Removal
from mnemo_tui.values.writes import WriteRequest
from tests.support.wire import Canned, serving

KEY = "mk_live_" + "5" * 32


def _drop(entries: list[Entry]) -> None:
    return None


def test_every_backend_reads_removals_in_pages_and_catchup_reports_each_once(
    make_backend: Callable[[str], Backend], state: StateDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(removal_values, "PAGE", 3)
    monkeypatch.setattr(remote_removals, "PAGE", 3)
    backend = make_backend("alice")
    notes = [backend.write(WriteRequest(content=f"n{i}", domain="notes")).atom_id for i in range(14)]
    reported: list[Removal] = []
    CatchUp(backend, state, changes=True).run(_drop, removed=reported.extend)
    for atom in notes[:4]:
        backend.delete(atom)
    CatchUp(backend, state, changes=True).run(_drop, removed=reported.extend)
    for atom in notes[4:13]:
        backend.delete(atom)
    found = backend.removals(None, None)
    assert found is not None and not found.gone
    assert [r.atom_id for r in found.items] == notes[:13]  # 13 over pages of 3 (a wipe's one instant: tests/server)
    CatchUp(backend, state, changes=True).run(_drop, removed=reported.extend)
    assert [r.atom_id for r in reported] == [r.atom_id for r in found.items]


def _removal(n: int) -> dict[str, str]:
    return {
        "atom_id": f"00000000-0000-4000-8000-{n:012d}",
        "scope": "notes",
        "removed_at": f"2026-01-0{n}T00:00:00Z",
        "reason": "deleted",
    }


def test_a_server_older_than_paging_answers_one_last_page() -> None:
    app = Canned().answer(200, {"removed": [_removal(1), _removal(2)]})
    with serving(app) as server:
        backend = RemoteBackend(server.url, KEY)
        try:
            found = backend.removals("notes", None)
        finally:
            backend.close()
    assert found is not None and [r.atom_id for r in found.items] == [_removal(1)["atom_id"], _removal(2)["atom_id"]]
    asked = json.loads(app.seen[0][2])
    assert asked["limit"] == removal_values.PAGE and asked["next"] is None


def test_pages_that_do_not_move_on_are_an_error_not_an_endless_read() -> None:
    app = Canned()
    for _ in range(3):
        app.answer(200, {"removed": [_removal(1)], "next": "5/x"})
    with serving(app) as server:
        backend = RemoteBackend(server.url, KEY)
        try:
            with pytest.raises(Unavailable, match="do not move on"):
                backend.removals("notes", None)
        finally:
            backend.close()
    assert [json.loads(raw)["next"] for _, _, raw in app.seen] == [None, "5/x"]
