"""The one walk (`mnemo_tui.catchup.walk`): repeats dropped and counted, a stuck cursor refused everywhere, one rule of new."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import timefmt
from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.catchup.walk import REMOTE_OVERLAP, Frontier, Mark, Walk, default_overlap, start_of, stream_wire, unread
from mnemo_tui.errors import BrokenFeed, CheckFailed
from mnemo_tui.proof import verify
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui.data.scopes import count_new
from mnemo_tui.values.model import Entry, Page, RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.broken_backends import NeverEnds, RepeatsAcrossPages, Wrapper
from tests.support.wire import Canned, LateClock, serving

Factory = Callable[..., Backend]
KEY = "mk_live_" + "1" * 32


def write_many(backend: Backend, n: int, domain: str = "general") -> list[str]:
    return [backend.write(WriteRequest(content=f"entry {i}", domain=domain)).atom_id for i in range(n)]


def test_a_walk_yields_every_entry_once_newest_first_and_drops_the_held_ids(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ids = list(reversed(write_many(backend, 25)))
    repeats: list[str] = []
    walk = Walk(backend, RecentQuery(limit=7), held={ids[0], ids[10]}, on_repeat=lambda e: repeats.append(e.atom_id))
    yielded = [e.atom_id for fresh in walk.pages() for e in fresh]
    assert yielded == [i for i in ids if i not in (ids[0], ids[10])]
    assert repeats == [ids[0], ids[10]]
    progress = walk.progress
    # Over an endpoint the walk is one streamed answer, a line a page of the query's limit: the same pages.
    assert (progress.pages, progress.delivered, progress.repeats, progress.done) == (4, 23, 2, True)
    assert progress.newest == backend.get(ids[0]).created_at  # a held entry still fixes the newest instant


def test_a_repeat_at_a_page_boundary_is_dropped_however_little_is_held(local: LocalBackend) -> None:
    ids = list(reversed(write_many(local, 10)))
    walk = Walk(RepeatsAcrossPages(local), RecentQuery(limit=3))
    assert [e.atom_id for fresh in walk.pages() for e in fresh] == ids
    assert walk.progress.repeats == 3  # the last entry of pages 1, 2 and 3, handed back on top of the next


class TwoCursors(Wrapper):
    """Hands back page 1 and page 2 forever: cursors that differ, and never reach the end."""

    def recent(self, query: RecentQuery) -> Page:
        first = self.inner.recent(RecentQuery(scope=query.scope, limit=query.limit))
        if query.cursor != "b":
            return Page(items=first.items, next_cursor="b")
        second = self.inner.recent(RecentQuery(scope=query.scope, limit=query.limit, cursor=first.next_cursor))
        return Page(items=second.items, next_cursor="a")


class EmptyForever(Wrapper):
    """Answers every page empty, each with a new cursor."""

    def recent(self, query: RecentQuery) -> Page:
        number = int(query.cursor or "0")
        return Page(items=[], next_cursor=str(number + 1))


@pytest.mark.parametrize("broken", [NeverEnds, TwoCursors, EmptyForever], ids=["same-cursor", "cycle", "empty"])
def test_a_cursor_that_does_not_advance_stops_every_walk_with_one_error(
    local: LocalBackend, state: StateDB, broken: Callable[[Backend], Backend]
) -> None:
    write_many(local, 9)
    backend = broken(local)
    with pytest.raises(BrokenFeed) as caught:
        for _ in Walk(backend, RecentQuery(limit=3)).pages():
            pass
    assert caught.value.exit_code == 5 and "does not advance" in caught.value.message
    with pytest.raises(BrokenFeed):
        CatchUp(backend, state, limit=3).run(lambda entries: None)
    assert CatchUp(local, state).watermark() is None  # nothing was committed
    with pytest.raises(BrokenFeed):
        verify(backend, [])
    assert issubclass(BrokenFeed, CheckFailed)  # `check` and `verify` report it as the contract failing


def looping_feed() -> Canned:
    """An endpoint whose feed never advances: every page is the same entry with the same cursor."""
    item = {
        "atom_id": "00000001-0000-4000-8000-000000000000",
        "content": "the same entry again",
        "domain": "general",
        "created_at": timefmt.to_iso(timefmt.now_us() - 60_000_000),
        "concepts": [],
    }
    return Canned(
        lambda path: (200, [] if path.endswith("/memory/rooms") else {"items": [item], "next_cursor": "again"})
    )


def test_a_looping_endpoint_is_exit_5_in_every_command_that_walks(cli: Any, tmp_path: Path) -> None:
    expect = tmp_path / "ids.txt"
    expect.write_text("00000000-0000-4000-8000-000000000000\n")  # an id (an empty --expect is refused first)
    with serving(looping_feed()) as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": KEY}
        runs = {
            "recent --all": cli("recent", "--all", env=env),
            "recent --all ndjson": cli("recent", "--all", "--format", "ndjson", env=env),
            "catchup": cli("catchup", "--exit-code", env=env),
            "verify": cli("verify", "--expect", str(expect), env=env),
        }
        mark = cli("watermark", "show", "--format", "json", env=env)
    for name, result in runs.items():
        assert result.code == 5, (name, result.stderr)
        assert "does not advance" in result.stderr and "Traceback" not in result.stderr, name
    assert json.loads(mark.stdout) is None  # the catch-up committed nothing


def test_stream_wire_is_the_snapshot_on_the_embedded_store_and_the_walk_on_an_endpoint(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ids = list(reversed(write_many(backend, 130)))
    chunks = list(stream_wire(backend, RecentQuery(limit=5)))
    assert [json.loads(w)["atom_id"] for chunk in chunks for w in chunk] == ids
    assert (backend.snapshot_wire(RecentQuery()) is None) == (backend.kind == "remote")
    if isinstance(backend, LocalBackend):  # the snapshot comes in chunks of the engine's size, not a page's
        rows = backend.engine.stream_rows
        assert [len(c) for c in chunks] == [min(rows, 130 - i) for i in range(0, 130, rows)]
        assert [len(c) for c in backend.engine.stream_wire("alice", RecentQuery(), chunk=50)] == [50, 50, 30]


# -- one rule of what is new --------------------------------------------------------------------


def test_the_overlap_default_lives_in_the_walk(make_backend: Factory, state: StateDB) -> None:
    backend = make_backend("alice")
    expected = REMOTE_OVERLAP if backend.kind == "remote" else 0
    assert default_overlap(backend) == expected == CatchUp(backend, state).overlap


def test_start_and_is_new_say_what_a_pass_from_the_mark_would_deliver() -> None:
    mark = Mark(1_000, frozenset({"at-mark", "just-below"}))
    start = start_of(mark, overlap=300)
    assert start.since == 700 and start.held == mark.ids
    assert start.is_new(1_001, "newer") and start.is_new(800, "late-commit")
    assert not start.is_new(1_000, "at-mark") and not start.is_new(900, "just-below")
    assert not start.is_new(699, "below-the-overlap")
    assert start_of(mark, 300, since=900).since == 900  # --since narrows, never widens
    assert start_of(Mark(), 300, since=5) == start_of(Mark(), 0, since=5)


def test_the_frontier_keeps_the_ids_within_the_overlap_below_the_newest_in_any_order() -> None:
    frontier = Frontier(overlap=10)
    for created, atom in [(100, "a"), (95, "b"), (120, "c"), (111, "d"), (80, "e")]:
        frontier.observe(created, atom)
    assert frontier.newest == 120 and set(frontier.ids) == {"c", "d"}
    assert frontier.mark() == Mark(120, frozenset({"c", "d"}))


def test_the_tui_counts_and_marks_a_late_commit_inside_the_overlap_as_catchup_delivers_it(tmp_path: Path) -> None:
    # An endpoint whose database let a transaction that took an earlier time commit after a later one.
    clock = LateClock()
    base = timefmt.now_us() - 60_000_000
    a, b, c = (f"{n:08d}-0000-4000-8000-000000000000" for n in (1, 2, 3))
    clock.add(base, a)
    clock.add(base + 1_000_000, b)
    state = StateDB(tmp_path / "state.db")
    with serving(clock) as server:
        backend = RemoteBackend(server.url, KEY)
        first = CatchUp(backend, state, consumer="tui")
        assert first.run(lambda entries: None).delivered == 2
        mark = first.watermark()
        clock.add(base + 500_000, c)  # half a second below the watermark, committed only now
        new = unread(mark, default_overlap(backend))
        counted = count_new(backend, new, None)
        blind = count_new(backend, unread(mark, 0), None)  # the rule the TUI had: from the watermark itself
        late = next(e for e in backend.recent(RecentQuery()).items if e.atom_id == c)
        shown_new = new.is_new(late.created_at, late.atom_id)
        delivered: list[Entry] = []
        CatchUp(backend, state, consumer="tui").run(delivered.extend)
        backend.close()
    state.close()
    assert [e.atom_id for e in delivered] == [c]
    assert counted == 1 and shown_new  # the sidebar's count and the feed's marker agree with catchup
    assert blind == 0  # without the overlap the late commit would be counted nowhere
