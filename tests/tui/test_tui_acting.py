"""The TUI for acting (issue 19): copy, write, delete, filter as you type, undo of `c`, keys, who you are."""

from __future__ import annotations

import html
import re
import threading
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Label, OptionList, Static

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup import refusals
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import NotFound
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.tui import MnemoApp
from mnemo_tui.tui.app import PINNED_SECONDS
from mnemo_tui.tui.screens.confirm import ConfirmScreen
from mnemo_tui.tui.screens.main import UNDO_SECONDS
from mnemo_tui.tui.screens.search import SEARCH_HITS, SearchScreen
from mnemo_tui.tui.widgets.rows import short_id
from mnemo_tui.values.model import Entry, RecentQuery
from tests.support.tui import (
    MINUTE,
    NOW,
    ROOM_OPS,
    FlakyBackend,
    add_room,
    as_backend,
    clock,
    fill,
    req,
    sample_store,
    settle,
    until,
)

pytestmark = pytest.mark.anyio
SIZE = (120, 36)
ROOM_READ = "room_01JDK0READ00000000000000E5"
ROOM_TEAM = "room_01JDK0TEAM" + "0" * 14 + "G7"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def app_on(backend: LocalBackend, state: StateDB, **kwargs: object) -> MnemoApp:
    """The app at a fixed clock, with its toasts and the undo window pinned: no timer races a slow test."""
    return MnemoApp(backend, state, clock=clock, poll_interval=None, pin_notices=True, **kwargs)  # type: ignore[arg-type]


def notices(app: MnemoApp) -> list[str]:
    return [n.message for n in app._notifications]


def total(local: LocalBackend, scope: str | None = None) -> int:
    return len(local.recent(RecentQuery(scope=scope, limit=100, include_history=True)).items)


def painted_lines(app: MnemoApp) -> list[str]:
    """The screen's lines as painted (the screenshot's text), each stripped."""
    svg = app.export_screenshot()
    return [line.strip(" │") for line in html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ").splitlines()]


async def press(pilot: Pilot[None], *keys: str) -> None:
    await pilot.press(*keys)
    await settle(pilot)


# -- 1. actions on an entry -----------------------------------------------------------------------


async def test_y_copies_the_short_id_and_shift_y_the_content(store: Store, local: LocalBackend, state: StateDB) -> None:
    sample_store(store)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        entry = app.feed_screen.feed.current
        assert entry is not None
        await press(pilot, "y")
        assert app.clipboard == short_id(entry.atom_id)
        assert any("Copied id" in n and "OSC 52" in n for n in notices(app))
        await press(pilot, "Y")
        assert app.clipboard == entry.content


async def test_e_on_a_room_entry_or_an_old_revision_writes_nothing(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    sample_store(store)
    before = total(local), total(local, "xroom:" + ROOM_OPS)
    app = app_on(local, state, scope="xroom:" + ROOM_OPS)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "e")
        assert any("room entries cannot be superseded" in n for n in notices(app))
        screen = app.feed_screen
        screen.open_scope("general", include_history=True)
        await settle(pilot)
        rows = [screen.feed.window.entry(i) for i in range(screen.feed.window.row_count)]
        screen.feed.cursor = next(i for i, e in enumerate(rows) if e is not None and e.superseded_by)
        await press(pilot, "e")
        assert any("is an old revision" in n for n in notices(app))
    assert (total(local), total(local, "xroom:" + ROOM_OPS)) == before


async def test_a_revision_that_cannot_be_stored_keeps_the_text_written(
    store: Store, local: LocalBackend, state: StateDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry is deleted elsewhere while it is being revised: the write fails, the editor's text is kept."""
    from mnemo_tui.tui import actions

    sample_store(store)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        entry = app.feed_screen.feed.current
        assert entry is not None

        def edited(initial: str, help_lines: list[str]) -> str:
            store.delete("local", entry.atom_id)  # gone before the revision is stored
            return "a revision worth keeping"

        # The pilot's terminal cannot be handed over: the editor runs in place, as its own call.
        monkeypatch.setattr(actions.EntryActions, "_suspended", lambda self, run: run())
        monkeypatch.setattr(actions, "edit_text", edited)
        await press(pilot, "e")
        await until(pilot, lambda: any("your text is kept in" in n for n in notices(app)))
    said = next(n for n in notices(app) if "your text is kept in" in n)
    kept = Path(said.rsplit("your text is kept in ", 1)[1])
    assert kept.read_text() == "a revision worth keeping\n" and kept.stat().st_mode & 0o777 == 0o600
    assert kept.parent.parent == Path(state.path).parent


async def test_w_in_a_room_read_only_to_the_reader_writes_nothing(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    room = store.create_room("alice", "announcements", room_id=ROOM_READ)
    code = store.create_invite("alice", room.room_id, scope="read").code
    store.join("local", code)
    store.bulk_insert([("alice", req("Office closed on Friday", room.address), NOW - MINUTE)])
    app = app_on(local, state, scope=room.address)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "w")
        assert any("read-only member of room announcements" in n for n in notices(app))
    assert total(local, room.address) == 1


async def test_d_asks_first_and_only_y_deletes(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 3)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        entry = app.feed_screen.feed.current
        assert entry is not None
        await press(pilot, "d")
        assert isinstance(app.screen, ConfirmScreen)
        assert short_id(entry.atom_id) in str(app.screen.query_one("#confirm-question", Static).render())
        await press(pilot, "x")  # anything but y keeps it
        assert app.screen is app.feed_screen and local.get(entry.atom_id).atom_id == entry.atom_id
        await press(pilot, "d", "y")
        with pytest.raises(NotFound):
            local.get(entry.atom_id)
        assert entry.atom_id not in {e.atom_id for e in app.feed_screen.feed.window.slots[0].items or []}
        assert any(f"deleted {short_id(entry.atom_id)}" in n for n in notices(app))


async def test_d_on_an_entry_deleted_meanwhile_says_it_was_already_gone(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 3)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        entry = app.feed_screen.feed.current
        assert entry is not None
        await press(pilot, "d")
        local.delete(entry.atom_id)  # another shell deletes it while the question is open
        await press(pilot, "y")
        assert any(f"{short_id(entry.atom_id)} was already gone" in n for n in notices(app)), notices(app)
        assert entry.atom_id not in app.session.deleted_here  # its removal did happen elsewhere


async def test_a_delete_that_fails_says_why_and_is_not_kept_as_its_own(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 3)
    flaky = FlakyBackend(local)
    app = app_on(as_backend(flaky), state)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        entry = app.feed_screen.feed.current
        assert entry is not None
        await press(pilot, "d")
        flaky.failure = FlakyBackend.unreachable()
        await press(pilot, "y")
        assert any("cannot reach" in n for n in notices(app)), notices(app)
        assert entry.atom_id not in app.session.deleted_here
    assert local.get(entry.atom_id).atom_id == entry.atom_id


async def test_its_own_delete_seen_by_the_live_feed_first_is_no_removal_elsewhere(
    store: Store, local: LocalBackend, state: StateDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(store, 3)
    deleted, answer = threading.Event(), threading.Event()
    delete_entry = refusals.delete_entry

    def answered_late(backend: Backend, entry: Entry) -> bool:
        # The entry is gone at once; its answer lands after the live feed has seen the removal (a push does).
        gone = delete_entry(backend, entry)
        deleted.set()
        answer.wait(30)
        return gone

    monkeypatch.setattr(refusals, "delete_entry", answered_late)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = app.feed_screen.feed
        entry = feed.current
        assert entry is not None
        await pilot.press("d", "y")
        await until(pilot, deleted.is_set)
        feed.check_live()
        await until(
            pilot,
            lambda: entry.atom_id not in {e.atom_id for e in feed.window.head + (feed.window.slots[0].items or [])},
        )
        answer.set()
        await settle(pilot)
        feed.check_live()  # the scope read again after the delete: its removal is seen again, and still not elsewhere
        await settle(pilot)
        assert any(f"deleted {short_id(entry.atom_id)}" in n for n in notices(app))
        assert not any("elsewhere" in n for n in notices(app)), notices(app)


async def test_d_on_a_room_entry_deletes_what_you_wrote_or_any_of_a_room_you_own_and_refuses_the_rest(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    """Our extension (docs/tui.md): the author takes a room entry back, the owner removes any; `d` on an
    entry of another member in someone else's room is refused before anything is asked."""
    team = store.create_room("alice", "team", room_id=ROOM_TEAM).address
    store.join("local", store.create_invite("alice", ROOM_TEAM).code)
    ops = add_room(store, "ops", ROOM_OPS)
    store.join("bob", store.create_invite("local", ROOM_OPS).code)
    store.bulk_insert(
        [
            ("local", req("my own note in team", team), NOW - 3 * MINUTE),
            ("alice", req("alice's note in team", team), NOW - 2 * MINUTE),
            ("bob", req("bob's note in ops", ops), NOW - MINUTE),
        ]
    )
    app = app_on(local, state, scope=team)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        alices = screen.feed.current
        assert alices is not None and alices.content == "alice's note in team"
        await press(pilot, "d")
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("by alice/claude-code" in n and "only its author" in n for n in notices(app))
        await press(pilot, "down")
        mine = screen.feed.current
        assert mine is not None and mine.content == "my own note in team"
        await press(pilot, "d")
        assert isinstance(app.screen, ConfirmScreen)
        await press(pilot, "y")
        assert any(f"deleted {short_id(mine.atom_id)}" in n for n in notices(app))
        screen.open_scope(ops)
        await settle(pilot)
        bobs = screen.feed.current
        assert bobs is not None and bobs.content == "bob's note in ops"
        await press(pilot, "d")
        assert isinstance(app.screen, ConfirmScreen)
        await press(pilot, "y")
        assert any(f"deleted {short_id(bobs.atom_id)}" in n for n in notices(app))
    assert [e.content for e in local.recent(RecentQuery(scope=team)).items] == ["alice's note in team"]
    assert local.recent(RecentQuery(scope=ops)).items == []


# -- 2. filter as you type; the server's search --------------------------------------------------


async def test_slash_filters_the_loaded_feed_as_you_type(store: Store, local: LocalBackend, state: StateDB) -> None:
    sample_store(store)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        feed = app.feed_screen.feed
        loaded = feed.window.row_count
        await press(pilot, "slash", *"plan")
        shown = [feed.entry_at(i) for i in range(feed.row_count)]
        assert shown and all(e is not None and "plan" in e.content.lower() for e in shown)
        await press(pilot, *"xyz")
        assert feed.row_count == 0
        await press(pilot, *["backspace"] * 7)
        assert feed.row_count == loaded  # an empty filter shows every row again
        await press(pilot, *"NIGHTLY")  # any case
        assert [e.content for e in map(feed.entry_at, range(feed.row_count)) if e] == [
            "Nightly digest sent: 14 new entries across 3 domains",
            "Renamed the consumer of the nightly job to nightly-digest",
        ]
        await press(pilot, "escape")
        assert feed.row_count == loaded and app.focused is feed


async def test_enter_searches_the_server_and_nothing_found_names_the_unsearched_rooms(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    sample_store(store)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "slash", *"quarantined", "enter")
        assert app.screen.query_one("#search-input", Input).value == "quarantined"
        assert "1 hit" in str(app.screen.query_one("#search-caption").render())
        await press(pilot, "escape", "ctrl+a")
        await press(pilot, *"zebra", "enter")
        report = str(app.screen.query_one("#search-report", Static).render())
        assert "zebra" in report and "Enter on a room searches it" in report  # the rooms are a list (issue 58)
        rooms = app.screen.query_one("#search-rooms", OptionList)
        assert f"xroom:{ROOM_OPS}" in [rooms.get_option_at_index(i).id for i in range(rooms.option_count)]


async def test_a_search_with_more_hits_than_shown_says_more_exist(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, SEARCH_HITS + 5)  # every entry matches "entry"
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "slash", *"entry", "enter")
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        assert screen.results.option_count == SEARCH_HITS
        caption = str(screen.caption.render())
        assert f"the first {SEARCH_HITS} hits" in caption and "more exist" in caption, caption
        await pilot.resize_terminal(60, 20)
        await settle(pilot)
        painted = " ".join(painted_lines(app))  # at 60 columns the caption wraps, whole, instead of being cut
        assert "more exist: narrow the words" in painted and "Esc to go back" in painted, painted
        screen.query_input.focus()
        await press(pilot, "enter")  # searched again at this width: every hit keeps to one line, cut with …
        assert screen.results.virtual_size.height == SEARCH_HITS, screen.results.virtual_size
        await pilot.resize_terminal(*SIZE)
        await press(pilot, "escape", "escape")  # the dialog, then the filter
        await press(pilot, "slash", *"00003", "enter")  # exactly one: nothing more to say
        screen = app.screen
        assert isinstance(screen, SearchScreen) and screen.results.option_count == 1
        assert "1 hit · best matches first (ctrl+o: newest) · Enter opens one" in str(screen.caption.render())


# -- 3. undo of `c` --------------------------------------------------------------------------------


async def test_u_after_c_restores_the_previous_watermark_exactly(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 40)
    CatchUp(local, state, consumer="me", scope=None).run(lambda entries: None, commit=True)
    key = StateKey.of(local, "me", None)
    before = state.load(key)
    assert before is not None
    store.bulk_insert([("local", req(f"later {i}"), NOW + i) for i in range(5)])
    app = app_on(local, state, consumer="me")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.feed_screen.scopes.counts["own"] == "5"
        await press(pilot, "c")
        moved = state.load(key)
        assert moved is not None and moved.created_at != before.created_at
        assert any("press u within" in n for n in notices(app))
        await press(pilot, "u")
        after = state.load(key)
        assert after is not None
        assert (after.created_at, after.boundary_ids) == (before.created_at, before.boundary_ids)
        assert app.feed_screen.scopes.counts["own"] == "5"
        await press(pilot, "u")  # only once
        assert any("Nothing to undo" in n for n in notices(app))


async def test_undo_of_a_first_c_leaves_no_watermark(store: Store, local: LocalBackend, state: StateDB) -> None:
    fill(store, 3)
    app = app_on(local, state, consumer="fresh")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, "c")
        assert state.load(StateKey.of(local, "fresh", None)) is not None
        await press(pilot, "u")
        assert state.load(StateKey.of(local, "fresh", None)) is None
        assert app.feed_screen.feed.watermark is None


async def test_toasts_and_the_undo_window_keep_their_seconds_unless_pinned(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 3)
    for pinned in (False, True):
        app = MnemoApp(local, state, consumer=f"pinned-{pinned}", clock=clock, poll_interval=None, pin_notices=pinned)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await press(pilot, "c")
            timeouts = {n.message.split(" ")[0]: n.timeout for n in app._notifications}
            assert app.feed_screen.undoable is not None
        if pinned:
            assert set(timeouts.values()) == {PINNED_SECONDS}
        else:
            assert timeouts["Marking"] == 2 and timeouts["3"] == UNDO_SECONDS


# -- 4. keys people know ---------------------------------------------------------------------------


async def test_half_pages_pages_tab_number_keys_click_and_the_history_key(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    sample_store(store)
    fill(store, 80, domain="notes", start=NOW - 5000 * MINUTE)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        feed = screen.feed
        page = feed.scrollable_content_region.height
        await press(pilot, "ctrl+d")
        assert feed.cursor == page // 2
        await press(pilot, "ctrl+u")
        assert feed.cursor == 0
        await press(pilot, "ctrl+f")
        assert feed.cursor == page - 1
        await press(pilot, "ctrl+b")
        assert feed.cursor == 0
        await press(pilot, "pagedown")
        assert feed.cursor == page - 1
        await press(pilot, "g")
        await press(pilot, "tab")
        assert app.focused is screen.scopes
        await press(pilot, "tab")
        assert app.focused is feed
        await press(pilot, "2")  # the second line of the sidebar: the first domain
        assert screen.scope == list(screen.scopes.items.values())[1].scope == "build"
        await press(pilot, "1")
        assert screen.scope is None
        await pilot.click("#feed", offset=(10, 3))
        await settle(pilot)
        assert feed.cursor == 3
        await press(pilot, "h")  # vim's left: no longer the history toggle
        assert not feed.include_history
        await press(pilot, "v")
        assert feed.include_history


async def test_a_scope_chosen_in_the_sidebar_or_by_number_takes_the_keys_to_its_feed(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    sample_store(store)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        await press(pilot, "tab")
        assert app.focused is screen.scopes
        await press(pilot, "down", "enter")  # the first domain, chosen in the sidebar
        assert screen.scope == "build" and app.focused is screen.feed
        await press(pilot, "enter")  # now opens the entry, instead of choosing the scope again
        assert screen.detail.display and screen.scope == "build"


async def test_at_60_columns_an_empty_room_never_hands_the_keys_to_the_hidden_sidebar(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 3)
    room = add_room(store, "empty", "room_01JDK0QQ0000000000000000H8")
    app = app_on(local, state, scope=room)
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert screen.switcher.current == "report" and not screen.query_one("#sidebar").display
        assert app.focused is not screen.scopes  # hidden: the keys pressed there would go nowhere to be seen
        await press(pilot, "1")  # the own store
        assert screen.scope is None and app.focused is screen.feed
        await press(pilot, "j", "enter")
        assert screen.feed.cursor == 1 and screen.detail.display


async def test_the_palette_lists_each_command_once_and_a_screenshot_lands_in_a_folder_that_exists(
    store: Store, local: LocalBackend, state: StateDB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(store, 3)
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nohome" / ".config"))
    monkeypatch.chdir(tmp_path)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert len(titles) == len(set(titles))
        assert "Keys" not in titles and titles.count("Help") == 1 and titles.count("Screenshot") == 1
        app.save_picture()
        assert not list(tmp_path.glob("*.svg"))  # never the current folder (often a git checkout)
        beside_state = app.session.state_path.parent / "screenshots"
        assert list(beside_state.glob("*.svg"))  # no Downloads or Pictures folder: beside the state
        pictures = tmp_path / "nohome" / "Pictures"
        pictures.mkdir(parents=True)
        app.save_picture()
        assert list(pictures.glob("*.svg"))
        downloads = tmp_path / "nohome" / "Downloads"
        downloads.mkdir(parents=True)
        # Through the palette: taken once the screen under it is drawn again, its footer row included.
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"Screenshot")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        (picture,) = downloads.glob("*.svg")
        assert "Filter" in picture.read_text() and "palette" in picture.read_text()


# -- 5. who you are ---------------------------------------------------------------------------------


async def test_the_status_names_consumer_and_backend_and_the_palette_switches_consumer(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 150)
    CatchUp(local, state, consumer="me", scope=None).run(lambda entries: None, commit=True)
    app = app_on(local, state, consumer="me")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        status = str(screen.status.render())
        assert "me on store.db (embedded)" in status
        assert screen.scopes.counts["own"] == ""
        app.switch_consumer()
        await settle(pilot)
        await press(pilot, *"reviewer", "enter")
        assert app.session.consumer == "reviewer"
        assert screen.scopes.counts["own"] == "99+"  # reviewer has read nothing yet
        assert screen.feed.watermark is None
        assert "reviewer on store.db (embedded)" in str(screen.status.render())
        # `c` now commits reviewer's watermark, and me's is untouched.
        await press(pilot, "c")
        assert state.load(StateKey.of(local, "reviewer", None)) is not None
        # The switch offers the consumers that exist (not the current one), and completes them.
        app.switch_consumer()
        await settle(pilot)
        offered = str(app.screen.query_one("#prompt-choices", Label).render())
        assert "or one of: me " in offered and "reviewer" not in offered
        await press(pilot, "m", "right", "enter")
        assert app.session.consumer == "me"


async def test_a_room_entry_is_opened_from_the_room_scope_with_its_number_key(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    ops = add_room(store, "ops", ROOM_OPS)
    store.bulk_insert([("local", req("room entry", ops), NOW - MINUTE)])
    fill(store, 2)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        number = [i.scope for i in app.feed_screen.scopes.items.values()].index(ops) + 1
        await press(pilot, str(number))
        assert app.feed_screen.scope == ops


async def test_at_60_by_20_the_sidebar_gives_way_and_the_status_line_stays_whole(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    fill(store, 5)
    app = app_on(local, state)
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert not screen.query_one("#sidebar").display
        status = str(screen.status.render()).strip()
        assert status == "5 (end) · default · ● no mark · live"
        await pilot.resize_terminal(120, 36)
        await settle(pilot)
        assert screen.query_one("#sidebar").display
        assert str(screen.status.render()).strip().endswith("· ● no watermark yet · live")
