"""An entry the feed shows, removed by another writer, leaves the feed on the next poll (issue 39; docs/tui.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Label, OptionList

from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from mnemo_tui.tui.screens.search import SearchScreen
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.removals import Removals
from mnemo_tui.values.search import SearchHit, SearchQuery
from tests.support.tui import MINUTE, NOW, ROOM_OPS, add_room, clock, fill, ids, remote, req, rows, settle
from tests.support.walk import walk_ids
from tests.support.wire import ThreadServer

pytestmark = pytest.mark.anyio
SIZE = (120, 36)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def notices(app: MnemoApp) -> list[str]:
    return [n.message for n in app._notifications]


def other_writer(store: Store) -> LocalBackend:
    """Another connection to the same file, as another process (or a room's other member) would delete."""
    return LocalBackend.open(store.path, "local")


async def test_removed_rows_leave_the_feed_the_cursor_stays_and_the_detail_closes(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 10)
    app = MnemoApp(local, state, clock=clock, poll_interval=None, pin_notices=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = app.feed_screen.feed
        shown = ids(rows(app))
        await pilot.press("j", "j", "enter")  # the detail of the third row
        await settle(pilot)
        assert app.feed_screen.detail.display and app.feed_screen.detail.entry.atom_id == shown[2]  # type: ignore[union-attr]
        other = other_writer(store)
        try:
            other.delete(shown[0])  # above the cursor
            other.delete(shown[2])  # the one under the cursor, open in the detail pane
        finally:
            other.close()
        feed.check_live()
        await settle(pilot)
        assert ids(rows(app)) == [shown[1], *shown[3:]] == walk_ids(local, RecentQuery(limit=100))
        assert feed.cursor == 1 and feed.current is not None and feed.current.atom_id == shown[3]
        assert not app.feed_screen.detail.display
        assert "2 entries removed elsewhere; its detail was closed" in notices(app)
        # The next poll asks from the newest removal seen: nothing is dropped or said twice.
        other = other_writer(store)
        try:
            other.write(req("written after the removals"))
        finally:
            other.close()
        feed.check_live()
        await settle(pilot)
        assert len(rows(app)) == 8 and len(feed.pending) == 1  # held: the cursor is away from the top
        assert sum("removed elsewhere" in n for n in notices(app)) == 1


async def test_the_activity_count_follows_a_removal_elsewhere_at_the_same_pace(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 10, start=NOW - 20 * MINUTE)
    app = MnemoApp(local, state, clock=clock, poll_interval=None, pin_notices=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        caption = app.feed_screen.activity_panel.query_one("#activity-caption", Label)
        before = str(caption.render()).splitlines()
        assert before[:2] == ["2 h, by 5 min", "10 entries"]
        other = other_writer(store)
        try:
            other.write(req("written elsewhere"))  # an arrival (after the fixed clock's now: in no bucket)
            app.feed_screen.feed.check_live()
            await settle(pilot)
            assert len(rows(app)) == 11
            assert str(caption.render()).splitlines() == before  # the buckets keep the first page's pace
            other.delete(ids(rows(app))[4])
        finally:
            other.close()
        app.feed_screen.feed.check_live()
        await settle(pilot)
        assert str(caption.render()).splitlines()[:2] == ["2 h, by 5 min", "9 entries"]


async def test_the_timer_drops_a_row_removed_in_another_domain_scope_too(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 5, domain="notes")
    fill(store, 3, domain="work")
    app = MnemoApp(local, state, scope="notes", clock=clock, poll_interval=0.05, pin_notices=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        shown = ids(rows(app))
        assert len(shown) == 5
        work = walk_ids(local, RecentQuery(scope="work", limit=100))
        other = other_writer(store)
        try:
            other.delete(work[0])  # another domain's removal: the feed of `notes` is not touched
            other.delete(shown[-1])
        finally:
            other.close()
        for _ in range(200):  # bounded: the timer polls every 50 ms
            await pilot.pause(0.05)
            if len(rows(app)) == 4 and "1 entry removed elsewhere" in notices(app):
                break
        assert ids(rows(app)) == shown[:-1]
        assert "1 entry removed elsewhere" in notices(app)


@pytest.fixture
def one_removal_seen(
    store: Store, local: LocalBackend, state: StateDB
) -> Callable[[], AbstractAsyncContextManager[tuple[MnemoApp, Pilot, list[str], LocalBackend]]]:
    """Six entries shown (after what the test stored first), the newest deleted by another writer and seen by
    a live check, an answer clear of drops: the app, its pilot, the ids shown at first and that writer."""

    @asynccontextmanager
    async def start() -> AsyncIterator[tuple[MnemoApp, Pilot, list[str], LocalBackend]]:
        fill(store, 6)
        app = MnemoApp(local, state, clock=clock, poll_interval=None, pin_notices=True)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            shown = ids(rows(app))
            other = other_writer(store)
            try:
                other.delete(shown[0])
                app.feed_screen.feed.check_live()  # the first answer: clear of drops
                await settle(pilot)
                yield app, pilot, shown, other
            finally:
                other.close()  # a second close of a closed writer does nothing

    return start


async def test_removals_dropped_unseen_read_the_scope_again(one_removal_seen: Callable[[], Any]) -> None:
    async with one_removal_seen() as (app, pilot, shown, other):
        feed = app.feed_screen.feed
        try:
            assert ids(rows(app)) == shown[1:]
            # A writer keeping no tombstones at all: its removal's tombstone is dropped at once.
            other.engine.tombstone_retention = 0  # type: ignore[attr-defined]
            other.delete(shown[3])
        finally:
            other.close()
        feed.check_live()
        await settle(pilot)
        assert ids(rows(app)) == [shown[1], shown[2], shown[4], shown[5]]
        assert any("read again" in n for n in notices(app))


class NoTombstones(DelegatingBackend):
    """A real store behind an answer the hosted service gives: no removals kept (None)."""

    def __init__(self, inner: LocalBackend) -> None:
        super().__init__(inner)
        self.asked = 0

    @property
    def principal(self) -> str:
        return self.inner.principal

    def removals(self, scope: str | None, after: int | None, upto: int | None = None) -> Removals | None:
        self.asked += 1
        return None

    def close(self) -> None:
        self.inner.close()


async def test_a_backend_without_tombstones_is_asked_once_and_nothing_fails(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 4)
    backend = NoTombstones(local)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None, pin_notices=True)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = app.feed_screen.feed
        shown = ids(rows(app))
        for n in range(3):
            other = other_writer(store)
            try:
                other.write(req(f"new {n}"))
            finally:
                other.close()
            feed.check_live()
            await settle(pilot)
        assert backend.asked == 1
        assert feed.live_error is None
        assert ids(rows(app))[3:] == shown
        assert not any("removed" in n for n in notices(app))


async def test_over_mnemo_serve_a_removed_row_leaves_on_the_next_poll(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB
) -> None:
    server, local, key = served
    written = [local.write(req(f"remote entry {i}")).atom_id for i in range(5)]
    backend = remote(server.url, key)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None, pin_notices=True)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            feed = app.feed_screen.feed
            assert ids(rows(app)) == list(reversed(written))
            local.delete(written[2])
            feed.check_live()
            await settle(pilot)
            assert ids(rows(app)) == [written[4], written[3], written[1], written[0]]
            assert "1 entry removed elsewhere" in notices(app)
            assert feed.live_error is None
    finally:
        backend.close()


async def test_a_room_deleted_elsewhere_empties_its_feed_and_live_pauses_with_why(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    ops = add_room(store, "ops", ROOM_OPS)
    store.bulk_insert([("local", req(f"ops note {i}", ops), NOW - (5 - i) * MINUTE) for i in range(3)])
    app = MnemoApp(local, state, scope=ops, clock=clock, poll_interval=None, pin_notices=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = app.feed_screen.feed
        assert len(rows(app)) == 3
        other = other_writer(store)
        try:
            other.delete_room(ROOM_OPS)
        finally:
            other.close()
        feed.check_live()
        await settle(pilot)
        # The room's feed is refused now, but its former member still hears of the removals.
        assert rows(app) == []
        assert "3 entries removed elsewhere" in notices(app)
        assert feed.live_error is not None


def hit_ids(app: MnemoApp) -> list[str]:
    """The hits the open search dialog lists, in order."""
    results = app.screen.query_one("#search-results", OptionList)
    return [results.get_option_at_index(i).id or "" for i in range(results.option_count)]


async def test_search_hits_removed_elsewhere_leave_the_open_dialog_and_the_highlight_keeps_its_place(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    # Five hits far down the scope: the feed holds only its first page, so it has none of them to drop.
    store.bulk_insert([("local", req(f"deploy note {i}"), NOW - 20_000 * MINUTE + i * MINUTE) for i in range(5)])
    fill(store, 150)
    app = MnemoApp(local, state, clock=clock, poll_interval=None, pin_notices=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = app.feed_screen.feed
        await pilot.press("slash", *"deploy", "enter")
        await settle(pilot)
        hits = hit_ids(app)
        assert len(hits) == 5 and not set(hits) & set(ids(rows(app)))
        results = app.screen.query_one("#search-results", OptionList)
        await pilot.press("down", "down")
        assert results.highlighted == 2
        other = other_writer(store)
        try:
            other.delete(hits[0])  # above the highlight
            other.delete(hits[2])  # the one highlighted
        finally:
            other.close()
        feed.check_live()  # the feed's live path, under the open dialog
        await settle(pilot)
        assert isinstance(app.screen, SearchScreen)
        assert hit_ids(app) == [hits[1], hits[3], hits[4]]
        assert results.highlighted == 1  # the next hit, as the feed's cursor goes to the next older row
        caption = str(app.screen.query_one("#search-caption", Label).render())
        assert "3 hits · 2 removed elsewhere" in caption
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is app.feed_screen
        assert app.feed_screen.detail.entry is not None and app.feed_screen.detail.entry.atom_id == hits[3]


class LaggingSearch(DelegatingBackend):
    """A real store whose search answers what it found the first time: an index that lags the store."""

    def __init__(self, inner: LocalBackend) -> None:
        super().__init__(inner)
        self.answer: list[SearchHit] | None = None

    @property
    def principal(self) -> str:
        return self.inner.principal

    def search(self, query: SearchQuery) -> list[SearchHit]:
        if self.answer is None:
            self.answer = self.inner.search(query)
        return self.answer

    def close(self) -> None:
        self.inner.close()


async def test_a_search_answered_after_a_removal_the_dialog_saw_leaves_the_removed_hit_out(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    store.bulk_insert([("local", req(f"deploy note {i}"), NOW - 20_000 * MINUTE + i * MINUTE) for i in range(3)])
    fill(store, 10)
    app = MnemoApp(LaggingSearch(local), state, clock=clock, poll_interval=None, pin_notices=True)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"deploy", "enter")
        await settle(pilot)
        hits = hit_ids(app)
        assert len(hits) == 3
        other = other_writer(store)
        try:
            other.delete(hits[0])
        finally:
            other.close()
        app.feed_screen.feed.check_live()
        await settle(pilot)
        assert hit_ids(app) == hits[1:]
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        screen.query_input.focus()
        await pilot.press("enter")  # the same words again: the lagging answer still has the removed hit
        await settle(pilot)
        assert hit_ids(app) == hits[1:]
        assert "2 hits · 1 removed elsewhere" in str(screen.caption.render())


async def test_removals_dropped_unseen_search_the_open_dialog_again(
    store: Store, one_removal_seen: Callable[[], Any]
) -> None:
    store.bulk_insert([("local", req(f"deploy note {i}"), NOW - 20_000 * MINUTE + i * MINUTE) for i in range(3)])
    async with one_removal_seen() as (app, pilot, _shown, other):
        feed = app.feed_screen.feed
        try:
            await pilot.press("slash", *"deploy", "enter")
            await settle(pilot)
            hits = hit_ids(app)
            assert len(hits) == 3
            # A writer keeping no tombstones: the removal of a hit is dropped before anyone sees it.
            other.engine.tombstone_retention = 0  # type: ignore[attr-defined]
            other.delete(hits[1])
        finally:
            other.close()
        feed.check_live()
        await settle(pilot)
        assert isinstance(app.screen, SearchScreen)
        assert hit_ids(app) == [hits[0], hits[2]]
        assert "2 hits · best matches first (ctrl+o: newest) · Enter opens one" in str(
            app.screen.caption.render()
        )  # read again: nothing to say removed


async def test_a_search_hit_open_in_the_detail_and_removed_elsewhere_closes_it(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    store.bulk_insert([("local", req("deploy note"), NOW - 20_000 * MINUTE)])
    fill(store, 150)
    app = MnemoApp(local, state, clock=clock, poll_interval=None, pin_notices=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"deploy", "enter")
        await settle(pilot)
        [hit] = hit_ids(app)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.feed_screen
        assert app.screen is screen and screen.detail.display and screen.detail.entry is not None
        shown = ids(rows(app))
        assert screen.detail.entry.atom_id == hit and hit not in shown  # opened from the search only
        other = other_writer(store)
        try:
            other.delete(hit)
        finally:
            other.close()
        screen.feed.check_live()
        await settle(pilot)
        assert not screen.detail.display
        assert "The entry in the detail pane was removed elsewhere; its detail was closed" in notices(app)
        assert ids(rows(app)) == shown  # no row of the feed was it
