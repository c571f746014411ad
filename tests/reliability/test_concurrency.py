"""Several processes on one store file: writers never commit behind a reader, walkers never skip or repeat."""

from __future__ import annotations

import multiprocessing as mp
from collections import Counter
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import Entry, RecentQuery
from mnemo_tui.values.writes import WriteRequest

WRITERS = 3
PER_WRITER = 150


def writer(path: str, index: int, start: Barrier, halfway: Barrier | Event) -> None:
    """Write PER_WRITER entries, starting with every other process (`start`), and wait at `halfway`
    half-way through: for the other writers, or for a walker pass that delivered entries."""
    backend = LocalBackend.open(path, "local")
    start.wait(60)
    for i in range(PER_WRITER):
        if i == PER_WRITER // 2 and halfway.wait(60) is False:
            raise SystemExit("the walker made no pass while this writer was writing")
        backend.write(WriteRequest(content=f"writer {index} entry {i}", domain=f"w{index}"))
    backend.close()


def walker(path: str, state_path: str, start: Barrier, walked: Event, stop: Event, out: str) -> None:
    """Catch-up passes until told to stop, then one last pass; writes what it received, one id a line,
    and how many passes delivered entries before `stop` (while the writers wrote) to `out.passes`."""
    backend = LocalBackend.open(path, "local")
    state = StateDB(state_path)
    received: list[str] = []

    def emit(entries: list[Entry]) -> None:
        received.extend(e.atom_id for e in entries)

    start.wait(60)
    passes = delivering = 0
    while not stop.is_set() and passes < 100_000:
        before = len(received)
        CatchUp(backend, state, consumer="walker", limit=7).run(emit)
        passes += 1
        if len(received) > before:
            delivering += 1
            walked.set()  # the writers, waiting half-way, go on: their second halves come after this pass
    CatchUp(backend, state, consumer="walker", limit=7).run(emit)
    Path(out).write_text("\n".join(received))
    Path(out + ".passes").write_text(str(delivering))
    state.close()
    backend.close()


@pytest.mark.slow
def test_three_writer_processes_and_a_walking_process(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    LocalBackend.open(path, "local").close()  # create and migrate once
    ctx = mp.get_context("spawn")
    start, walked, stop = ctx.Barrier(WRITERS + 1), ctx.Event(), ctx.Event()
    out = tmp_path / "received.txt"
    writers = [ctx.Process(target=writer, args=(path, i, start, walked)) for i in range(WRITERS)]
    reader = ctx.Process(target=walker, args=(path, str(tmp_path / "state.db"), start, walked, stop, str(out)))
    for p in [*writers, reader]:
        p.start()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    stop.set()
    reader.join(120)
    assert reader.exitcode == 0
    # Passes delivered entries while the writers wrote: one at least before their second halves (they
    # waited for it), so the walk really ran under writes and its pages met entries written meanwhile.
    assert int(Path(str(out) + ".passes").read_text()) >= 1
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
    start, halfway = ctx.Barrier(WRITERS), ctx.Barrier(WRITERS)
    writers = [ctx.Process(target=writer, args=(path, i, start, halfway)) for i in range(WRITERS)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    backend = LocalBackend.open(path, "local")
    rows = backend.engine.db.execute("SELECT created_at, seq, domain FROM atoms ORDER BY seq").fetchall()
    backend.close()
    # The writers met half-way: every first half was committed before any second half (none ran alone).
    half = PER_WRITER // 2
    firsts = Counter(r[2] for r in rows[: WRITERS * half])
    assert firsts == {f"w{i}": half for i in range(WRITERS)}
    # Commit order (seq) and time order agree: no entry was ever committed behind a later one.
    times = [r[0] for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times)
