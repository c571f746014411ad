"""Snapshot tests of each screen and state of the TUI, at a fixed size, with a fixed clock and fixed data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from tests.support.tui import (
    MINUTE,
    NOW,
    ROOM_OPS,
    FlakyBackend,
    add_room,
    as_backend,
    clock,
    req,
    sample_store,
    settle,
)

SIZE = (120, 36)
Compare = Callable[..., bool]


def app_on(backend: Any, state: StateDB, **kwargs: Any) -> MnemoApp:
    """The app at a fixed clock, with its toasts pinned: a snapshot of one never races its timer."""
    return MnemoApp(backend, state, clock=clock, poll_interval=None, pin_notices=True, **kwargs)


def then(
    *keys: str, extra: Callable[[Pilot[None]], Awaitable[None]] | None = None, notices: bool = False
) -> Callable[[Pilot[None]], Awaitable[None]]:
    """Settle, press keys, run `extra`, settle again, and drop toasts unless they are the subject (`notices`)."""

    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        if keys:
            await pilot.press(*keys)
            await settle(pilot)
        if extra is not None:
            await extra(pilot)
            await settle(pilot)
        if not notices:
            pilot.app.clear_notifications()
        await pilot.pause()

    return run


@pytest.fixture(autouse=True)
def colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots show the real colours (the suite sets NO_COLOR for the CLI's sake)."""
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def sample(store: Store, local: LocalBackend) -> LocalBackend:
    sample_store(store)
    return local


class TestFeed:
    def test_first_paint_of_the_own_store(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then())

    def test_one_domain(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state, scope="build"), terminal_size=SIZE, run_before=then())

    def test_a_room(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state, scope="xroom:" + ROOM_OPS), terminal_size=SIZE, run_before=then())

    def test_with_history(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("v"))

    def test_marked_caught_up(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("c"))

    def test_new_entries_while_scrolled_away(
        self, snap_compare: Compare, store: Store, sample: LocalBackend, state: StateDB
    ) -> None:
        async def write(pilot: Pilot[None]) -> None:
            store.bulk_insert([("local", req(f"fresh {i}"), NOW - (5 - i) * MINUTE) for i in range(3)])
            assert isinstance(pilot.app, MnemoApp)
            pilot.app.feed_screen.feed.check_live()

        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("j", "j", extra=write))

    def test_end_of_a_long_feed(self, snap_compare: Compare, store: Store, local: LocalBackend, state: StateDB) -> None:
        store.bulk_insert([("local", req(f"note {i:03d}", "notes"), NOW - (200 - i) * 7 * MINUTE) for i in range(120)])
        app = app_on(local, state, page_size=25)
        assert snap_compare(app, terminal_size=SIZE, run_before=then(*["pagedown"] * 6, "G"))


LONG = "Long: the walk holds only the boundary ids, " + "so memory stays flat however long the walk runs; " * 4
WIDE = "幅の広い文字：カーソルは飛ばさず、繰り返さない。見出しは切れても読める。" * 2


@pytest.fixture
def varied(store: Store, sample: LocalBackend) -> LocalBackend:
    """The sample store plus a long entry and one of wide (two-cell) characters."""
    store.bulk_insert([("local", req(LONG, "research"), NOW - 3 * MINUTE), ("local", req(WIDE), NOW - 2 * MINUTE)])
    return sample


@pytest.mark.parametrize("size", [(140, 40), (80, 24), (60, 20)], ids=["140x40", "80x24", "60x20"])
class TestSizes:
    def test_feed(self, snap_compare: Compare, varied: LocalBackend, state: StateDB, size: tuple[int, int]) -> None:
        assert snap_compare(app_on(varied, state), terminal_size=size, run_before=then())

    def test_history_marks_and_the_change(
        self, snap_compare: Compare, varied: LocalBackend, state: StateDB, size: tuple[int, int]
    ) -> None:
        # With history: the superseded plan is the fourth row; its detail shows what the next revision changed.
        keys = ("v", "j", "j", "j", "enter")
        assert snap_compare(app_on(varied, state), terminal_size=size, run_before=then(*keys))

    def test_help(self, snap_compare: Compare, varied: LocalBackend, state: StateDB, size: tuple[int, int]) -> None:
        assert snap_compare(app_on(varied, state), terminal_size=size, run_before=then("question_mark"))


class TestDetail:
    def test_an_entry_with_its_revisions(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state, scope="general"), terminal_size=SIZE, run_before=then("enter"))

    def test_markdown_content(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(
            app_on(sample, state, scope="general"), terminal_size=SIZE, run_before=then("j", "j", "enter")
        )


class TestEmpty:
    def test_empty_own_store_lists_the_unsearched_rooms(
        self, snap_compare: Compare, store: Store, local: LocalBackend, state: StateDB
    ) -> None:
        add_room(store, "ops", ROOM_OPS)
        assert snap_compare(app_on(local, state), terminal_size=SIZE, run_before=then())

    def test_empty_store_without_rooms(self, snap_compare: Compare, local: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(local, state), terminal_size=SIZE, run_before=then())


class TestErrors:
    def test_unreachable_endpoint(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        flaky = as_backend(FlakyBackend(sample, FlakyBackend.unreachable()))
        assert snap_compare(app_on(flaky, state), terminal_size=SIZE, run_before=then())

    def test_refused_key(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        flaky = as_backend(FlakyBackend(sample, FlakyBackend.refused()))
        assert snap_compare(app_on(flaky, state), terminal_size=SIZE, run_before=then())


class TestDialogs:
    def test_search_results(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("slash", *"plan", "enter"))

    def test_help(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("question_mark"))

    def test_search_results_newest_first(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        keys = ("slash", *"plan", "enter", "ctrl+o")
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then(*keys))

    def test_switch_consumer_at_80_by_24(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        for consumer in ("nightly-digest", "build-bot", "release-reviewer", "weekly-summary"):
            CatchUp(sample, state, consumer=consumer).run(lambda entries: None, commit=True)
        app = app_on(sample, state)

        async def ask(pilot: Pilot[None]) -> None:
            app.switch_consumer()

        assert snap_compare(app, terminal_size=(80, 24), run_before=then(extra=ask))


class TestActing:
    def test_filter_as_you_type(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("slash", *"plan"))

    def test_search_that_finds_nothing_names_the_unsearched_rooms(
        self, snap_compare: Compare, sample: LocalBackend, state: StateDB
    ) -> None:
        keys = ("slash", *"zebra", "enter")
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then(*keys))

    def test_a_room_entry_cannot_be_revised_notice(
        self, snap_compare: Compare, sample: LocalBackend, state: StateDB
    ) -> None:
        app = app_on(sample, state, scope="xroom:" + ROOM_OPS)
        assert snap_compare(app, terminal_size=SIZE, run_before=then("e", notices=True))

    def test_delete_asks_first(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("d"))

    def test_caught_up_offers_undo(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("c", notices=True))

    def test_copied_id_notice(self, snap_compare: Compare, sample: LocalBackend, state: StateDB) -> None:
        assert snap_compare(app_on(sample, state), terminal_size=SIZE, run_before=then("y", notices=True))
