"""Pilot tests of the TUI: the real app over a real store, asserting on its state."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.tui import MnemoApp
from mnemo_tui.tui.widgets.notices import NewMarker
from mnemo_tui.values.model import RecentQuery
from tests.support import walk
from tests.support.cli import CliResult
from tests.support.tui import (
    MINUTE,
    NOW,
    ROOM_OPS,
    FlakyBackend,
    add_room,
    as_backend,
    clock,
    fill,
    ids,
    req,
    rows,
    sample_store,
    settle,
)

SIZE = (120, 36)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_app(backend: object, state: StateDB, **kwargs: object) -> MnemoApp:
    options: dict[str, object] = {"clock": clock, "poll_interval": None}
    options.update(kwargs)
    return MnemoApp(backend, state, **options)  # type: ignore[arg-type]


def walk_ids(backend: LocalBackend, scope: str | None = None, limit: int = 100) -> list[str]:
    return walk.walk_ids(backend, RecentQuery(scope=scope, limit=limit))


async def test_opens_on_the_newest_entries_of_the_own_store(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 30)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert screen.scope is None
        assert ids(rows(app)) == walk_ids(local)
        assert rows(app)[0].content == "entry 00029"  # type: ignore[union-attr]
        assert screen.feed.window.at_end
        assert app.focused is screen.feed


async def test_scroll_loading_equals_a_cursor_walk_and_holds_only_a_window(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 233)
    app = make_app(local, state, page_size=20, keep_pages=3)
    seen: dict[int, str] = {}
    most_held = 0
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        for _ in range(60):
            if screen.feed.window.at_end and screen.feed.cursor == screen.feed.window.row_count - 1:
                break
            await pilot.press("pagedown")
            await settle(pilot, 2)
            first, last = screen.feed.visible_rows()
            for row in range(first, min(last, screen.feed.window.row_count - 1) + 1):
                entry = screen.feed.window.entry(row)
                assert entry is not None, f"row {row} on screen is not held"
                seen[row] = entry.atom_id
            most_held = max(most_held, screen.feed.window.held_pages)
        assert screen.feed.window.at_end
        walked = walk_ids(local, limit=20)
        assert [seen[i] for i in range(len(seen))] == walked
        # A window of pages, not the whole scope: the first page plus at most `keep_pages`.
        assert most_held <= 4
        assert screen.feed.window.held_pages < len(screen.feed.window.slots)
        # Back to the top: the evicted pages are read again with their own cursors, identically.
        await pilot.press("g")
        await settle(pilot)
        top = [screen.feed.window.entry(i) for i in range(30)]
        assert ids(top) == walked[:30]


async def test_a_short_page_with_a_cursor_is_not_the_end(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 12)

    class ShortPages(FlakyBackend):
        def recent(self, query: RecentQuery):  # type: ignore[no-untyped-def]
            page = self.inner.recent(query)
            # A size-bounded front end may return fewer items and still a cursor: keep the cursor.
            if page.next_cursor is not None:
                return type(page)(
                    items=page.items[:2],
                    next_cursor=self.inner.recent(
                        RecentQuery(scope=query.scope, limit=2, cursor=query.cursor)
                    ).next_cursor,
                )
            return page

    app = make_app(as_backend(ShortPages(local)), state, page_size=5)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot, 8)
        screen = app.feed_screen
        assert screen.feed.window.at_end
        assert ids(rows(app)) == walk_ids(local)
        assert any(slot.size < 5 and slot.next_cursor for slot in screen.feed.window.slots)


async def test_mark_caught_up_moves_the_watermark_exactly_as_catchup(
    tmp_path: Path, store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 150)
    app = make_app(local, state, consumer="tui")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert screen.scopes.counts["own"] == "99+"
        await pilot.press("c")
        await settle(pilot)
        assert screen.scopes.counts["own"] == ""
        assert screen.feed.watermark is not None
    tui_mark = state.load(StateKey(local.identity, "local", "tui", None))
    CatchUp(local, state, consumer="cli", scope=None).run(lambda entries: None)
    cli_mark = state.load(StateKey(local.identity, "local", "cli", None))
    assert tui_mark is not None and cli_mark is not None
    assert (tui_mark.created_at, tui_mark.boundary_ids) == (cli_mark.created_at, cli_mark.boundary_ids)
    assert tui_mark.created_at == store.db.execute("SELECT max(created_at) FROM atoms").fetchone()[0]


async def test_mark_caught_up_matches_the_mnemo_catchup_command(
    tmp_path: Path, store: Store, local: LocalBackend, state: StateDB, cli: Callable[..., CliResult]
) -> None:
    fill(store, 40, domain="build")
    fill(store, 5, domain="general", start=NOW - 5 * MINUTE)
    env = {"MNEMO_STORE": str(store.path), "MNEMO_STATE": str(state.path)}
    result = cli("catchup", "--scope", "build", "--consumer", "cli", "--format", "json", env=env)
    assert result.code == 0, result.stderr
    app = make_app(local, state, consumer="tui", scope="build")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
    tui_mark = state.load(StateKey(local.identity, "local", "tui", "build"))
    cli_mark = state.load(StateKey(local.identity, "local", "cli", "build"))
    assert tui_mark is not None and cli_mark is not None
    assert (tui_mark.created_at, tui_mark.boundary_ids) == (cli_mark.created_at, cli_mark.boundary_ids)
    # The own store's watermark is untouched by a walk of one domain.
    assert state.load(StateKey(local.identity, "local", "tui", None)) is None


async def test_an_entry_written_while_the_app_runs_appears_on_top(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 10)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        other = LocalBackend.open(store.path, "local")  # another connection, as another process would write
        try:
            written = other.write(req("written while the app runs", "incoming"))
        finally:
            other.close()
        screen.feed.check_live()
        await settle(pilot)
        assert rows(app)[0].atom_id == written.atom_id  # type: ignore[union-attr]
        assert len(rows(app)) == 11
        assert not screen.marker.display
        # A domain that did not exist at start joins the sidebar, with its count.
        assert screen.scopes.counts.get("s:incoming") == "1"
        # Nothing changed since: the probe says so and no read is made; no repeat appears.
        screen.feed.check_live()
        await settle(pilot)
        assert ids(rows(app)) == walk_ids(local)


async def test_live_updates_arrive_on_their_own(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 3)
    app = make_app(local, state, poll_interval=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        written = local.write(req("from the same connection"))
        for _ in range(100):  # bounded: the timer polls every 50 ms
            await pilot.pause(0.05)
            if rows(app) and rows(app)[0].atom_id == written.atom_id:  # type: ignore[union-attr]
                break
        assert rows(app)[0].atom_id == written.atom_id  # type: ignore[union-attr]


async def test_scrolled_away_the_list_holds_still_and_a_marker_counts(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 50)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        before = ids(rows(app))
        await pilot.press("j", "j")
        assert screen.feed.cursor == 2
        new = [local.write(req(f"new {i}")).atom_id for i in range(3)]
        screen.feed.check_live()
        await settle(pilot)
        marker = app.screen.query_one("#new-marker", NewMarker)
        assert marker.display
        assert "3 new" in str(marker.render())
        assert ids(rows(app)) == before
        assert screen.feed.cursor == 2
        new += [local.write(req(f"new {i}")).atom_id for i in range(3, 5)]
        screen.feed.check_live()
        await settle(pilot)
        assert "5 new" in str(marker.render())
        assert ids(rows(app)) == before
        await pilot.press("g")
        await settle(pilot)
        assert not marker.display
        assert ids(rows(app)) == list(reversed(new)) + before
        assert ids(rows(app)) == walk_ids(local)


async def test_an_empty_scope_shows_its_report_and_a_room_in_it_switches_scope(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    ops = add_room(store, "ops", ROOM_OPS)
    store.bulk_insert([("local", req("room entry", ops, "ops-bot"), NOW - MINUTE)])
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert screen.switcher.current == "report"
        rooms = screen.report_view.query_one("#report-rooms")
        assert [o.id for o in rooms.options] == [ops]  # type: ignore[attr-defined]
        assert "holds no entries yet" in str(screen.report_view.query_one("#report-text").render())
        rooms.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert screen.scope == ops
        assert screen.switcher.current == "feed"
        assert [e.content for e in rows(app)] == ["room entry"]  # type: ignore[union-attr]


@pytest.mark.parametrize("failure", [FlakyBackend.unreachable(), FlakyBackend.refused()], ids=["unavailable", "auth"])
async def test_errors_show_and_recover_on_retry(
    store: Store, local: LocalBackend, state: StateDB, failure: Exception
) -> None:
    fill(store, 5)
    flaky = FlakyBackend(local, failure)  # type: ignore[arg-type]
    app = make_app(as_backend(flaky), state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert screen.switcher.current == "error"
        text = str(screen.error_view.render())
        if "reach" in str(failure):
            assert "unreachable" in text and "press r to retry" in text
        else:  # the app keeps its key: the advice is to start again (r still asks again, with the same key)
            assert "refused" in text and "start mnemo tui again" in text
        assert app.is_running
        flaky.failure = None
        await pilot.press("r")
        await settle(pilot)
        assert screen.switcher.current == "feed"
        assert ids(rows(app)) == walk_ids(local)
        assert screen.scopes.items


async def test_a_feed_whose_first_page_failed_is_not_called_live(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 3)
    flaky = FlakyBackend(local, FlakyBackend.unreachable())  # type: ignore[arg-type]
    app = make_app(as_backend(flaky), state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert screen.switcher.current == "error"
        # Nothing is polled before a first page (only `r` asks again): the status line must not say live.
        status = str(screen.status.render())
        assert status.endswith(" · not live"), status
        flaky.failure = None
        await pilot.press("r")
        await settle(pilot)
        assert str(screen.status.render()).endswith(" · live")


async def test_an_unexpected_failure_in_a_read_is_shown_not_fatal(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 3)
    flaky = FlakyBackend(local, RuntimeError("boom"))
    app = make_app(as_backend(flaky), state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert app.is_running
        assert screen.switcher.current == "error"
        assert "internal error: RuntimeError: boom" in str(screen.error_view.render())
        flaky.failure = None
        await pilot.press("r")
        await settle(pilot)
        assert ids(rows(app)) == walk_ids(local)


@pytest.fixture
def paused_live(
    store: Store, local: LocalBackend, state: StateDB
) -> Callable[[], AbstractAsyncContextManager[tuple[MnemoApp, Pilot, FlakyBackend]]]:
    """Five entries shown, then a live check that cannot reach the endpoint: the app, its pilot and the backend."""

    @asynccontextmanager
    async def start() -> AsyncIterator[tuple[MnemoApp, Pilot, FlakyBackend]]:
        fill(store, 5)
        flaky = FlakyBackend(local)
        app = make_app(as_backend(flaky), state)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            flaky.failure = FlakyBackend.unreachable()
            app.feed_screen.feed.check_live()
            await settle(pilot)
            yield app, pilot, flaky

    return start


async def test_a_live_failure_pauses_and_resumes(paused_live: Callable[[], Any], local: LocalBackend) -> None:
    async with paused_live() as (app, pilot, flaky):
        screen = app.feed_screen
        assert "live paused" in str(screen.status.render())
        flaky.failure = None
        local.write(req("after the outage"))
        screen.feed.check_live()
        await settle(pilot)
        assert "live paused" not in str(screen.status.render())
        assert rows(app)[0].content == "after the outage"  # type: ignore[union-attr]


async def test_live_paused_says_why_where_the_status_line_has_room(paused_live: Callable[[], Any]) -> None:
    async with paused_live() as (app, pilot, _flaky):
        screen = app.feed_screen
        status = lambda: str(screen.status.render()).strip()  # noqa: E731
        # 120 columns: the long words and the reason do not fit, the short words and the whole reason do.
        assert (
            status()
            == "5 (end) · default · ● no mark · live paused: cannot reach http://127.0.0.1:9/api/v1 (connection refused)"
        )
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert status().startswith("5 (end) · default · ● no mark · live paused: cannot reach http://")
        assert status().endswith("…") and len(status()) == 78
        await pilot.resize_terminal(60, 20)
        await settle(pilot)
        assert status() == "5 (end) · default · ● no mark · live paused"  # too little room for a reason


async def test_a_result_for_a_scope_the_reader_left_is_dropped(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    from mnemo_tui.tui import messages

    fill(store, 5, domain="build")
    fill(store, 7, domain="notes", start=NOW - 100 * MINUTE)
    app = make_app(local, state, scope="build")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        stale_generation = screen.feed.generation
        stale = local.recent(RecentQuery(scope="build"))
        screen.open_scope("notes")
        await settle(pilot)
        screen.feed.post_message(messages.PageLoaded(stale_generation, 0, stale, None))
        screen.feed.post_message(messages.PageLoaded(stale_generation, 1, stale, None))
        await settle(pilot)
        assert ids(rows(app)) == walk_ids(local, "notes")


async def test_sidebar_lists_scopes_with_counts_and_switches(store: Store, local: LocalBackend, state: StateDB) -> None:
    sample_store(store)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        items = list(screen.scopes.items.values())
        assert [(i.kind, i.label) for i in items] == [
            ("own", "Own store"),
            ("domain", "build"),
            ("domain", "general"),
            ("domain", "research"),
            ("room", "ops"),
            ("room", "design"),
        ] or [(i.kind, i.label) for i in items][:4] == [
            ("own", "Own store"),
            ("domain", "build"),
            ("domain", "general"),
            ("domain", "research"),
        ]
        assert screen.scopes.counts["own"] == "9"
        assert screen.scopes.counts["s:build"] == "3"
        assert screen.scopes.counts[f"s:xroom:{ROOM_OPS}"] == "2"
        screen.scopes.focus()
        screen.scopes.highlighted = screen.scopes.get_option_index("s:research")
        await pilot.press("enter")
        await settle(pilot)
        assert screen.scope == "research"
        assert {e.domain for e in rows(app)} == {"research"}  # type: ignore[union-attr]
        assert screen.activity_panel.activity is not None
        assert sum(screen.activity_panel.activity.counts) == 2


async def test_history_toggle_detail_and_supersession_chain(store: Store, local: LocalBackend, state: StateDB) -> None:
    sample_store(store, rooms=False)
    app = make_app(local, state, scope="general")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        contents = [e.content for e in rows(app)]  # type: ignore[union-attr]
        assert not any(c.startswith("Plan: ship the TUI with a fixed") for c in contents)
        await pilot.press("v")
        await settle(pilot)
        contents = [e.content for e in rows(app)]  # type: ignore[union-attr]
        assert any(c.startswith("Plan: ship the TUI with a fixed") for c in contents)
        await pilot.press("g", "enter")
        await settle(pilot)
        assert screen.detail.display
        meta = str(screen.detail.query_one("#detail-meta").render())
        assert "older" in meta and "fixed page size" in meta
        await pilot.press("escape")
        assert not screen.detail.display


async def test_opening_the_detail_keeps_the_row_being_read_in_view(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 60)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        await pilot.press(*["j"] * 30)
        await settle(pilot)  # moving down may load the next page: the row is there before it is opened
        assert screen.feed.has_focus and screen.feed.cursor == 30
        await pilot.press("enter")
        await settle(pilot)
        first, last = screen.feed.visible_rows()
        assert screen.detail.display
        assert first <= screen.feed.cursor <= last
        assert screen.detail.entry == rows(app)[30]


async def test_search_opens_a_hit_in_the_detail_pane(store: Store, local: LocalBackend, state: StateDB) -> None:
    sample_store(store, rooms=False)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await pilot.press(*"bm25", "enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.feed_screen
        assert app.screen is screen
        assert screen.detail.entry is not None
        assert "bm25" in screen.detail.entry.content


async def test_the_command_palette_switches_scope(store: Store, local: LocalBackend, state: StateDB) -> None:
    sample_store(store, rooms=False)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Open research")
        from textual.command import CommandList

        for _ in range(100):  # bounded: the palette searches its commands in the background
            await pilot.pause(0.02)
            found = app.screen.query(CommandList)
            if found and found.first().option_count and found.first().highlighted is not None:
                break
        await pilot.press("enter")
        await settle(pilot)
        screen = app.feed_screen
        assert screen.scope == "research"
        assert {e.domain for e in rows(app)} == {"research"}  # type: ignore[union-attr]


async def test_keys_typed_into_the_filter_and_the_search_box_are_text_not_commands(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 5)
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"qghjkcrydwv?")
        await settle(pilot)
        from textual.widgets import Input

        assert app.is_running
        assert app.feed_screen.filter_bar.value == "qghjkcrydwv?"
        assert app.feed_screen.feed.watermark is None  # `c` did not mark anything caught up
        assert app.screen is app.feed_screen and len(rows(app)) == 5  # `d` deleted nothing
        await pilot.press("enter")  # the same words to the server-side search
        await settle(pilot)
        await pilot.press(*"qc")
        assert app.screen.query_one("#search-input", Input).value == "qghjkcrydwv?qc"
        await pilot.press("escape")
        assert app.screen is app.feed_screen
        await pilot.press("escape")
        assert not app.feed_screen.filter_bar.display and app.feed_screen.feed.filter == ""


async def test_help_and_quit(store: Store, local: LocalBackend, state: StateDB) -> None:
    app = make_app(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        assert app.screen is app.feed_screen
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


def test_cli_tui_refuses_a_bad_scope(cli: Callable[..., CliResult]) -> None:
    result = cli("tui", "--scope", "xroom:nope")
    assert result.code == 2
    assert "xroom:room_" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_cli_does_not_import_textual_until_tui_runs() -> None:
    import subprocess
    import sys

    code = "import sys, mnemo_tui.cli.app; print('textual' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=True
    )
    assert out.stdout.strip() == "False"
