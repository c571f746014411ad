"""The keys people try and the words they need (issue 58): Ctrl-C, the search's order, an empty search's rooms,
an empty store's first steps, the author's agent, dialogs whole at 80x24; on the embedded store and served."""

from __future__ import annotations

import html
import json
import re

import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input, Label, OptionList, Static

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from mnemo_tui.tui.screens.confirm import ConfirmScreen
from mnemo_tui.tui.screens.prompt import PromptScreen
from mnemo_tui.tui.screens.search import SEARCH_HITS, SearchScreen
from mnemo_tui.tui.widgets.rows import author_in
from mnemo_tui.values.model import Entry, RecentQuery
from mnemo_tui.values.search import SearchQuery
from tests.support.tui import MINUTE, NOW, ROOM_OPS, clock, remote, req, sample_store, settle
from tests.support.wire import ThreadServer

pytestmark = pytest.mark.anyio
SIZE = (120, 36)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def painted(app: MnemoApp) -> str:
    """The screen's text as painted, its lines joined by spaces (a wrapped sentence reads whole)."""
    svg = app.export_screenshot()
    lines = html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ").splitlines()
    return re.sub(r"\s+", " ", " ".join(line.strip(" │╭╮╰╯─") for line in lines))


async def press(pilot: Pilot[None], *keys: str) -> None:
    await pilot.press(*keys)
    await settle(pilot)


def flaky_store(store: Store) -> None:
    """Matches of `flaky` whose best match is the oldest: relevance and recency disagree."""
    texts = ["flaky flaky flaky: the flaky suite", "a flaky run", "flaky again, on main", "one more flaky test"]
    store.bulk_insert([("local", req(text, "build"), NOW - (len(texts) - i) * MINUTE) for i, text in enumerate(texts)])


# -- Ctrl-C ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["feed", "search", "confirm"])
async def test_ctrl_c_quits_at_once_from_the_feed_and_from_a_dialog(
    store: Store, local: LocalBackend, state: StateDB, where: str
) -> None:
    sample_store(store)
    app = MnemoApp(local, state, clock=clock, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        if where == "search":
            await press(pilot, "slash", *"plan", "enter")
            screen = app.screen
            assert isinstance(screen, SearchScreen)
            screen.query_input.focus()
            await settle(pilot)
        elif where == "confirm":
            await press(pilot, "d")
            assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("ctrl+c")  # once: no "press ctrl+q" notice, no second press
        await pilot.pause()
        assert app.return_code == 0
    assert len(local.recent(RecentQuery()).items) == 9  # nothing deleted on the way out


# -- search: relevance or recency ---------------------------------------------------------------------


async def check_order_toggle(pilot: Pilot[None], app: MnemoApp, backend: Backend) -> None:
    await press(pilot, "slash", *"flaky", "enter")
    screen = app.screen
    assert isinstance(screen, SearchScreen)

    def listed() -> list[str]:
        return [str(screen.results.get_option_at_index(i).id) for i in range(screen.results.option_count)]

    def cli(order: str) -> list[str]:
        query = SearchQuery(query="flaky", order_by=order, top_k=51)  # type: ignore[arg-type]
        return [hit.entry.atom_id for hit in backend.search(query)]

    assert listed() == cli("relevance") and "best matches first (ctrl+o: newest)" in str(screen.caption.render())
    await press(pilot, "ctrl+o")
    assert listed() == cli("recency") != cli("relevance")
    hits = [screen.hits[i] for i in listed()]
    assert [e.created_at for e in hits] == sorted((e.created_at for e in hits), reverse=True)
    assert "newest first (ctrl+o: best)" in str(screen.caption.render())
    screen.query_input.focus()
    await press(pilot, "ctrl+o")  # from the query box too
    assert listed() == cli("relevance") and screen.order == "relevance"


async def test_a_key_toggles_the_search_between_relevance_and_recency(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    flaky_store(store)
    app = MnemoApp(local, state, clock=clock, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await check_order_toggle(pilot, app, local)


async def test_the_search_order_toggles_against_a_served_store(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB
) -> None:
    server, local, key = served
    for text in ["flaky flaky flaky: the flaky suite", "a flaky run", "flaky again, on main", "one more flaky test"]:
        local.write(req(text, "build"))
    backend = remote(server.url, key)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await check_order_toggle(pilot, app, backend)
    finally:
        backend.close()


# -- an empty search's rooms -----------------------------------------------------------------------


async def test_an_empty_search_lists_its_unsearched_rooms_and_enter_searches_one(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    sample_store(store)
    app = MnemoApp(local, state, clock=clock, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "slash", *"Thursday", "enter")  # only the ops room has it
        screen = app.screen
        assert isinstance(screen, SearchScreen) and not screen.hits
        report = str(screen.report.render())
        assert "Thursday" in report and "Re-run with" not in report and "--scope" not in report
        assert "Enter on a room searches it" in report
        rooms = screen.query_one("#search-rooms", OptionList)
        assert rooms.has_focus and rooms.option_count == 2
        await press(pilot, "down")  # design, then ops
        assert rooms.get_option_at_index(rooms.highlighted or 0).id == f"xroom:{ROOM_OPS}"
        await press(pilot, "enter")
        assert screen.scope == f"xroom:{ROOM_OPS}" and str(screen.heading.render()) == "Search room 'ops'"
        assert [e.content for e in screen.hits.values()] == ["Deploy window moved to Thursday 14:00 UTC"]
        assert not screen.report.display and not rooms.display
        await press(pilot, "enter")  # the hit opens in the detail pane
        assert app.feed_screen.detail.display


# -- an empty store ---------------------------------------------------------------------------------


async def test_an_empty_store_says_to_write_or_run_mnemo_demo(local: LocalBackend, state: StateDB) -> None:
    app = MnemoApp(local, state, clock=clock, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = str(app.feed_screen.report_view.query_one("#report-text", Static).render())
        assert "holds no entries yet" in text
        assert "Press w to write the first entry" in text and "`mnemo demo`" in text


async def test_an_empty_served_store_says_to_write_not_to_run_demo(
    served: tuple[ThreadServer, LocalBackend, str], state: StateDB
) -> None:
    server, _local, key = served
    backend = remote(server.url, key)
    app = MnemoApp(backend, state, clock=clock, poll_interval=None)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            text = str(app.feed_screen.report_view.query_one("#report-text", Static).render())
            assert "Press w to write the first entry" in text and "mnemo demo" not in text  # demo refuses an endpoint
    finally:
        backend.close()


# -- the author's agent ----------------------------------------------------------------------------------


def entry_by(principal: str, agent: str) -> Entry:
    atom_id = "00000000-0000-4000-8000-000000000001"
    wire = {"atom_id": atom_id, "content": "x", "domain": "general", "created_at": "2026-11-30T08:00:00Z"}
    wire |= {"concepts": [], "provenance": {"principal": principal, "agent": agent, "agent_name": agent}}
    return Entry.of(atom_id, NOW, json.dumps(wire))


def test_the_author_gives_the_agent_before_the_principal_when_space_is_short() -> None:
    assert author_in(entry_by("local", "planner"), 16).rstrip() == "local/planner"  # whole where it fits
    assert author_in(entry_by("local", "planning-bot"), 12) == "planning-bot"
    assert author_in(entry_by("alice", "planner"), 12) == "…/planner   "
    assert author_in(entry_by("local", "a-very-long-agent-name"), 12) == "a-very-long…"


async def test_the_feed_row_shows_the_agent_at_120_columns(store: Store, local: LocalBackend, state: StateDB) -> None:
    store.bulk_insert([("local", req("Plan the release", "planning", "planning-bot"), NOW - MINUTE)])
    app = MnemoApp(local, state, clock=clock, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = painted(app)
        assert "planning-bot" in text and "local/plann…" not in text


# -- dialogs whole at 80x24 ----------------------------------------------------------------------------


def cut_off(box: Widget) -> list[str]:
    """The labels of a dialog wider than the dialog's inside (what it clips)."""
    inside = box.content_region
    return [str(w.render()) for w in box.query(Label) if w.display and w.region.right > inside.right]


async def test_dialogs_never_clip_their_own_text_at_80_by_24(store: Store, local: LocalBackend, state: StateDB) -> None:
    sample_store(store)
    for consumer in ("nightly-digest", "build-bot", "release-reviewer", "weekly-summary"):
        CatchUp(local, state, consumer=consumer).run(lambda entries: None, commit=True)
    app = MnemoApp(local, state, clock=clock, poll_interval=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.switch_consumer()
        await settle(pilot)
        assert isinstance(app.screen, PromptScreen)
        assert cut_off(app.screen.query_one("#prompt-box")) == []
        text = painted(app)
        assert "weekly-summary (→ completes)" in text and "enter takes it · esc leaves it as it is" in text, text
        await press(pilot, "escape", "d")
        assert isinstance(app.screen, ConfirmScreen)
        assert cut_off(app.screen.query_one("#confirm-box")) == []
        assert "y deletes · any other key keeps it" in painted(app)
        await press(pilot, "escape", "slash", *"flaky", "enter")
        assert isinstance(app.screen, SearchScreen)
        assert cut_off(app.screen.query_one("#search-box")) == []
        assert "best matches first (ctrl+o: newest) · Enter opens one · Esc to go back" in painted(app)
        assert app.screen.query_one("#search-input", Input).value == "flaky"


async def test_the_first_search_keeps_each_hit_to_one_line_beside_the_scrollbar_it_brings(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    long = "Build failed on feat/cursor-v2: test_cursor_roundtrip timed out after 30 s " * 3
    store.bulk_insert([("local", req(f"{i} {long}", "ci"), NOW - i * MINUTE) for i in range(SEARCH_HITS + 5)])
    app = MnemoApp(local, state, clock=clock, poll_interval=None)
    async with app.run_test(size=(130, 38)) as pilot:
        await settle(pilot)
        await press(pilot, "slash", *"roundtrip", "enter")  # the list had no scrollbar before these hits
        screen = app.screen
        assert isinstance(screen, SearchScreen) and screen.results.show_vertical_scrollbar
        assert screen.results.virtual_size.height == SEARCH_HITS  # one line a hit, none wrapped
