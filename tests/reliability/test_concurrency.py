"""Several processes on one store file: writers never commit behind a reader, walkers never skip or repeat."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup import CatchUp
from mnemo_tui.model import Entry, RecentQuery, WriteRequest
from mnemo_tui.state.statedb import StateDB

WRITERS = 3
PER_WRITER = 150


def writer(path: str, index: int, start: mp.synchronize.Event) -> None:
    backend = LocalBackend.open(path, "local")
    start.wait(30)
    for i in range(PER_WRITER):
        backend.write(WriteRequest(content=f"writer {index} entry {i}", domain=f"w{index}"))
    backend.close()


def walker(path: str, state_path: str, start: mp.synchronize.Event, stop: mp.synchronize.Event, out: str) -> None:
    """Catch-up passes until told to stop, then one last pass; writes what it received, one id a line."""
    backend = LocalBackend.open(path, "local")
    state = StateDB(state_path)
    received: list[str] = []
    times: list[int] = []

    def emit(entries: list[Entry]) -> None:
        received.extend(e.atom_id for e in entries)
        times.extend(e.created_at for e in entries)

    start.wait(30)
    passes = 0
    while not stop.is_set() and passes < 10_000:
        CatchUp(backend, state, consumer="walker", limit=7).run(emit)
        passes += 1
    CatchUp(backend, state, consumer="walker", limit=7).run(emit)
    Path(out).write_text("\n".join(received))
    state.close()
    backend.close()


@pytest.mark.slow
def test_three_writer_processes_and_a_walking_process(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    LocalBackend.open(path, "local").close()  # create and migrate once
    ctx = mp.get_context("spawn")
    start, stop = ctx.Event(), ctx.Event()
    out = tmp_path / "received.txt"
    writers = [ctx.Process(target=writer, args=(path, i, start)) for i in range(WRITERS)]
    reader = ctx.Process(target=walker, args=(path, str(tmp_path / "state.db"), start, stop, str(out)))
    for p in [*writers, reader]:
        p.start()
    start.set()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    stop.set()
    reader.join(120)
    assert reader.exitcode == 0
    received = out.read_text().split("\n")
    backend = LocalBackend.open(path, "local")
    all_ids: list[str] = []
    page = backend.recent(RecentQuery(limit=100))
    all_ids += [e.atom_id for e in page.items]
    while page.next_cursor:
        page = backend.recent(RecentQuery(limit=100, cursor=page.next_cursor))
        all_ids += [e.atom_id for e in page.items]
    backend.close()
    assert len(all_ids) == WRITERS * PER_WRITER
    assert len(received) == len(set(received)), "the walker received an entry twice"
    assert sorted(received) == sorted(all_ids), "the walker missed an entry"


@pytest.mark.slow
def test_created_at_is_strictly_increasing_across_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    LocalBackend.open(path, "local").close()
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    writers = [ctx.Process(target=writer, args=(path, i, start)) for i in range(WRITERS)]
    for p in writers:
        p.start()
    start.set()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    backend = LocalBackend.open(path, "local")
    rows = backend.engine.db.execute("SELECT created_at, seq FROM atoms ORDER BY seq").fetchall()
    backend.close()
    # Commit order (seq) and time order agree: no entry was ever committed behind a later one.
    times = [r[0] for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times)
