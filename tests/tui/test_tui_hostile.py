"""Hostile stored text in the TUI: no markup parsed, no action bound, no terminal escape written, no crash."""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import Markdown, Static

import mnemo_tui.tui.app
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.cli.cmd_tui import TuiFailed, run_app
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from tests.support.hostile import HOSTILE, HOSTILE_SHOWN, MARKUP_ROOMS, raw_controls
from tests.support.tui import MINUTE, NOW, add_room, clock, req, settle

SIZE = (120, 36)
ROOM_SLASH = "room_01JDK0S1ASH0000000000000C3"
ROOM_CLICK = "room_01JDK0C11CK0000000000000D4"
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def hostile_store(store: Store, *, own: bool = True) -> tuple[str, str]:
    """Rooms named `[/]` and `[@click=app.quit]x[/]`, and entries whose content, agent and domain attack."""
    slash = add_room(store, MARKUP_ROOMS[0], ROOM_SLASH)
    click = add_room(store, MARKUP_ROOMS[1], ROOM_CLICK)
    rows = [(req(HOSTILE + "\n\nsecond line [b]not bold[/b] <b>raw</b>", slash, "agent\x1b]0;TUI-PWNED\x07"), 5)]
    if own:
        rows += [
            (req(HOSTILE, "dom[/]\x1b[2K", HOSTILE), 6),
            (req("[@click=app.quit]click me[/]", "general", "[/]"), 7),
        ]
    store.bulk_insert([("local", r, NOW - minutes * MINUTE) for r, minutes in rows])
    return slash, click


def app_on(backend: LocalBackend, state: StateDB, **kwargs: object) -> MnemoApp:
    """The app at a fixed clock, with its toasts pinned: no timer races a slow test."""
    return MnemoApp(backend, state, clock=clock, poll_interval=None, pin_notices=True, **kwargs)  # type: ignore[arg-type]


def no_action(content: Content) -> bool:
    return not any("click" in str(span.style) for span in content.spans)


def shown(widget: Static) -> Content:
    content = widget.content
    assert isinstance(content, Content), f"{widget.id} was given {type(content).__name__}, not plain Content"
    return content


def feed_text(pilot: Pilot[None]) -> str:
    feed = pilot.app.feed_screen.feed  # type: ignore[attr-defined]
    return "\n".join("".join(s.text for s in feed.render_line(y)) for y in range(feed.size.height))


async def test_markup_room_names_and_hostile_entries_show_as_written(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    slash, _ = hostile_store(store)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        # The sidebar lists both rooms by their names, as text.
        prompts = [screen.scopes.get_option_at_index(i).prompt for i in range(screen.scopes.option_count)]
        # A name is cut (with an ellipsis) to the sidebar's width, then its count.
        names = [p.plain[2:-4].strip() for p in prompts if isinstance(p, Content)]
        assert "Own store" in names and "dom[/]\\x1b[2K" in names
        assert "[/]" in names and any(n.startswith("[@click=app.") and n.endswith("…") for n in names)
        assert all(no_action(p) for p in prompts if isinstance(p, Content))
        # The feed's rows hold the escapes as visible text, never a raw control.
        rows = feed_text(pilot)
        assert "\\x1b]0;PWNED\\x07" in rows and "[@click=app.quit]click me[/]" in rows
        assert raw_controls(rows) == set()
        # The detail pane: the head names the hostile author as text; the body has no escape.
        await pilot.press("enter")
        await settle(pilot)
        head = shown(screen.detail.query_one("#detail-head", Static))
        assert "\\x1b]0;PWNED" in head.plain and raw_controls(head.plain) == set() and no_action(head)
        body = screen.detail.query_one("#detail-body", Markdown).source
        assert HOSTILE_SHOWN in body and raw_controls(body) == set()
        # Opening the room named `[/]` retitles the feed with its name, as text.
        screen.open_scope(slash)
        await settle(pilot)
        title = shown(screen.title_bar)
        assert title.plain == f"Room [/]  ·  {slash}" and no_action(title)
        rows = feed_text(pilot)
        assert "agent\\x1b]0…" in rows and raw_controls(rows) == set()  # the agent first (issue 58), escaped
        # Inside the room the domain column gives way to content; the detail pane names the room, as text.
        await pilot.press("enter")
        await settle(pilot)
        head = shown(screen.detail.query_one("#detail-head", Static))
        assert "#[/]" in head.plain and no_action(head)
        assert app.is_running and app.failure is None


async def test_the_room_named_click_binds_no_action(store: Store, local: LocalBackend, state: StateDB) -> None:
    _, click = hostile_store(store)
    app = app_on(local, state, scope=click)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        title = shown(app.feed_screen.title_bar)
        assert title.plain.startswith("Room [@click=app.quit]x[/]") and no_action(title)
        # Clicking the title runs nothing: the app is still there.
        await pilot.click("#feed-title")
        await settle(pilot)
        assert app.is_running and app.failure is None
        # The command palette reads its titles as markup: the room's stays text there too.
        titles = [Content.from_markup(c.title) for c in app.get_system_commands(app.screen)]
        assert any(t.plain == "Open [@click=app.quit]x[/]" and no_action(t) for t in titles)
        assert any(t.plain == "Open [/]" for t in titles)


async def test_an_empty_report_naming_markup_rooms(store: Store, local: LocalBackend, state: StateDB) -> None:
    hostile_store(store, own=False)
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert screen.switcher.current == "report"
        assert "holds no entries yet" in shown(screen.report_view.query_one("#report-text", Static)).plain
        rooms = screen.report_view.query_one("#report-rooms")
        prompts = [rooms.get_option_at_index(i).prompt for i in range(rooms.option_count)]  # type: ignore[attr-defined]
        assert [p.plain.split("  ")[0].strip() for p in prompts] == list(MARKUP_ROOMS)
        assert all(no_action(p) for p in prompts)


class Boom(MnemoApp):
    CSS_PATH = str(Path(mnemo_tui.tui.app.__file__).with_name("mnemo.tcss"))

    def on_mount(self) -> None:
        api_key = "mnemo_sk_secret_in_a_local"  # noqa: F841 - what Textual's pretty traceback would print
        raise RuntimeError(f"broken while showing {HOSTILE}")


async def test_angle_brackets_show_in_the_detail_pane_as_written_and_html_stays_text(
    store: Store, local: LocalBackend, state: StateDB
) -> None:
    written = "Use Option<String> and Vec<T>; a<b and c>d; <b>raw</b> <script>x</script>"
    store.bulk_insert([("local", req(f"**Note**: {written}"), NOW - MINUTE)])
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        # What is painted (Markdown's own rendering of the body), not the source it was given.
        svg = app.export_screenshot()
        painted = html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")
        assert f"Note: {written}" in painted  # Markdown still renders; no tag is dropped or obeyed


@pytest.mark.parametrize("size", [(120, 36), (60, 20)])
async def test_a_very_long_room_name_keeps_the_feed_title_to_one_line(
    store: Store, local: LocalBackend, state: StateDB, size: tuple[int, int]
) -> None:
    room = add_room(store, "R" * 200, "room_01JDK0QQ0000000000000000H8")
    store.bulk_insert([("local", req("one entry", room), NOW - MINUTE)])
    app = app_on(local, state, scope=room)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        screen = app.feed_screen
        assert "R" * 20 in str(screen.title_bar.render())
        assert screen.title_bar.region.height == 1  # a name never pushes the rows down
        assert screen.feed.region.y == screen.title_bar.region.bottom


def test_an_exception_in_the_tui_is_exit_5_in_one_line_without_locals(
    local: LocalBackend, state: StateDB, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(TuiFailed) as caught:
        run_app(Boom(local, state, clock=clock, poll_interval=None), debug=False, headless=True)
    assert caught.value.exit_code == 5
    assert caught.value.message == (
        "the terminal UI stopped on an internal error (RuntimeError); re-run with --debug for details"
    )
    out, err = capsys.readouterr()
    assert "mnemo_sk_secret" not in out + err and "Traceback" not in out + err and "PWNED" not in out + err


def test_with_debug_the_traceback_is_plain_and_safe(
    local: LocalBackend, state: StateDB, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(TuiFailed):
        run_app(Boom(local, state, clock=clock, poll_interval=None), debug=True, headless=True)
    _, err = capsys.readouterr()
    assert "Traceback" in err and "RuntimeError: broken while showing" in err
    assert "\\x1b]0;PWNED" in err and raw_controls(err) == set()
    assert "mnemo_sk_secret" not in err  # no local variables


@pytest.fixture
def colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots show the real colours (the suite sets NO_COLOR for the CLI's sake)."""
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.mark.usefixtures("colour")
class TestPictures:
    """What a reader sees: the escapes as text, the markup room names as written (tests/tui/__snapshots__)."""

    def test_hostile_entries_and_markup_rooms(
        self, snap_compare: Callable[..., bool], store: Store, local: LocalBackend, state: StateDB
    ) -> None:
        hostile_store(store)
        assert snap_compare(app_on(local, state), terminal_size=SIZE, run_before=pictured("enter"))

    def test_an_empty_report_naming_markup_rooms(
        self, snap_compare: Callable[..., bool], store: Store, local: LocalBackend, state: StateDB
    ) -> None:
        hostile_store(store, own=False)
        assert snap_compare(app_on(local, state), terminal_size=SIZE, run_before=pictured())


def pictured(*keys: str) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        if keys:
            await pilot.press(*keys)
            await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run


async def test_the_revisions_escape_stored_text_once(store: Store, local: LocalBackend, state: StateDB) -> None:
    from mnemo_tui.values.writes import WriteRequest

    old = store.write("local", req("old \x1b[31m red")).atom_id
    store.write("local", WriteRequest("new \x1b[31m red", domain="general", supersedes=(old,)))
    app = app_on(local, state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g", "enter")
        await settle(pilot)
        meta = shown(app.feed_screen.detail.query_one("#detail-meta", Static)).plain
        assert "older" in meta and "old \\x1b[31m red" in meta, meta  # as the diff shows it: one backslash
        assert "\\\\x1b" not in meta and not raw_controls(meta)
        changes = shown(app.feed_screen.detail.query_one("#detail-changes", Static)).plain
        assert "- old \\x1b[31m red" in changes
