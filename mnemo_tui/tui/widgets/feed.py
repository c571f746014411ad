"""Provides `FeedView`: the feed of one scope on screen; its rows and live state are a `FeedData` (`tui/data/feed.py`)."""

from __future__ import annotations

from typing import ClassVar, Generic, Self, TypeVar, cast, overload

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import on, work
from textual.binding import Binding, BindingType
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.signal import Signal
from textual.strip import Strip

from mnemo_tui.catchup.walk import unread
from mnemo_tui.errors import MnemoError
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.tui import messages as msg
from mnemo_tui.tui.data.errors import as_error
from mnemo_tui.tui.data.feed import FeedData
from mnemo_tui.tui.data.live import LiveFound, Poll, PushEnded, poll_live
from mnemo_tui.tui.data.window import FeedWindow, PageRequest
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.rows import AGE_SECONDS, RowPainter, end_line
from mnemo_tui.values.model import Entry, RecentQuery, Watermark
from mnemo_tui.values.removals import Removals

T = TypeVar("T")


class OfData(Generic[T]):
    """A read-only attribute of a feed's `FeedData`, under the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, feed: None, owner: type) -> OfData[T]: ...
    @overload
    def __get__(self, feed: FeedView, owner: type) -> T: ...
    def __get__(self, feed: FeedView | None, owner: type) -> OfData[T] | T:
        return self if feed is None else cast("T", getattr(feed.data, self.name))


class FeedView(ScrollView, can_focus=True):
    """The rows of one scope, newest first, with a cursor row.

    It reads its own pages (one cursor walk, a window of them held), its consumer's watermark (the
    `●` marks) and what is new (live polls, the push follow), in threads that post their result to
    it, and hands them to its `FeedData`; it tells the screen what a person should see next through
    the messages below.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "feed--cursor",
        "feed--new",
        "feed--time",
        "feed--id",
        "feed--author",
        "feed--domain",
        "feed--tag",
        "feed--text",
        "feed--superseded",
        "feed--end",
        "feed--pending",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "cursor_down", "Down", show=False),
        Binding("k,up", "cursor_up", "Up", show=False),
        Binding("pagedown,space,ctrl+f", "page_down", "Page down", show=False),
        Binding("pageup,ctrl+b", "page_up", "Page up", show=False),
        Binding("ctrl+d", "half_page(1)", "Half page down", show=False),
        Binding("ctrl+u", "half_page(-1)", "Half page up", show=False),
        Binding("enter", "select", "Open", show=False),
        Binding("g,home", "top", "Top", show=False),
        Binding("G,end", "bottom", "Bottom", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True)

    class Highlighted(Message):
        """The cursor moved onto an entry (None while its page is loading)."""

        def __init__(self, entry: Entry | None) -> None:
            super().__init__()
            self.entry = entry

    class Selected(Message):
        """The reader pressed enter on an entry."""

        def __init__(self, entry: Entry) -> None:
            super().__init__()
            self.entry = entry

    class Opened(Message):
        """The first page of a scope arrived: `empty` when the scope has nothing to show at all."""

        def __init__(self, query: RecentQuery, empty: bool, newest: int | None, oldest: int | None) -> None:
            super().__init__()
            self.query = query
            self.empty = empty
            self.newest = newest
            self.oldest = oldest

    class Failed(Message):
        """A read failed; `blank` when the feed has nothing to show instead (the first page)."""

        def __init__(self, error: MnemoError, blank: bool) -> None:
            super().__init__()
            self.error = error
            self.blank = blank

    class Arrived(Message):
        """New entries were found by a live poll (shown on top, or held: `held` of them wait)."""

        def __init__(self, entries: list[Entry], held: int, overflow: bool) -> None:
            super().__init__()
            self.entries = entries
            self.held = held
            self.overflow = overflow

    class Changed(Message):
        """What the status line says changed (rows loaded, the watermark, live paused or not)."""

    class Removed(Message):
        """Entries of the scope were removed elsewhere: `count` of them were rows shown (or held as new) and
        are gone from the feed (0: none, but the detail pane may show one opened from a search);
        `reread`: removals were dropped unseen, so the scope must be read again instead."""

        def __init__(self, ids: set[str], count: int, reread: bool = False) -> None:
            super().__init__()
            self.ids = ids
            self.count = count
            self.reread = reread

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        # The rows and their live state; the push follow's thread hands its news here as a message.
        self.data = FeedData(session, lambda news: self.post_message(msg.Live(news)))
        # Every removal of the scope seen, shown or not (None: dropped unseen, read again): for the search dialog.
        self.removals_seen: Signal[set[str] | None] = Signal(self, "removals_seen")
        self.watermark: Watermark | None = None
        self.unread = unread(None, 0)
        self.loading = True
        self._focus_when_loaded = False
        self.room_names: dict[str, str] = {}
        self._styles: dict[str, Style] = {}
        self.painter = RowPainter(self._style)

    # What the screen's title and status line read of the data, under the data's names.
    scope: OfData[str | None] = OfData()
    include_history: OfData[bool] = OfData()
    generation: OfData[int] = OfData()
    window: OfData[FeedWindow] = OfData()
    pending: OfData[list[Entry]] = OfData()
    pending_overflow: OfData[bool] = OfData()
    live_error: OfData[str | None] = OfData()
    first_failed: OfData[bool] = OfData()
    offers_push: OfData[bool] = OfData()
    pushing: OfData[bool] = OfData()
    reconnecting: OfData[bool] = OfData()
    filter: OfData[str] = OfData()

    def focus(self, scroll_visible: bool = True) -> Self:
        """Take the keys; while a page loads, once it has: Textual refuses focus to a widget whose `loading` is
        set, so a scope chosen in the sidebar (or by number) left the keys there, Enter choosing it again."""
        if self.loading:
            self._focus_when_loaded = True
            return self
        return super().focus(scroll_visible)

    def on_mount(self) -> None:
        # Rows are cached by the age they show, so a repaint redraws only the rows whose age changed.
        self.set_interval(AGE_SECONDS, self.refresh)

    # -- the scope: its pages, its watermark ----------------------------------------------

    def open(self, scope: str | None, include_history: bool) -> None:
        """Show a scope from its newest entry; anything still in flight for the previous one is dropped."""
        self.data.open(scope, include_history)
        self.set_watermark(None)
        self.loading = True
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)
        self.painter.clear()
        self._resized()
        self.request_page(PageRequest(0, None))
        self.load_watermark(self.data.generation, scope)

    def read_query(self, cursor: str | None = None) -> RecentQuery:
        """The feed's read of its scope (at a cursor)."""
        return self.data.query(cursor)

    def request_page(self, request: PageRequest) -> None:
        query = self.data.want(request)
        if query is not None:
            self.load_page(self.data.generation, request.index, query)

    @work(thread=True, group="feed", exit_on_error=False)
    def load_page(self, generation: int, index: int, query: RecentQuery) -> None:
        session = self.session
        try:
            token = session.probe() if index == 0 else None
            self.post_message(msg.PageLoaded(generation, index, session.backend.recent(query), token))
        except Exception as exc:  # noqa: BLE001 - even a bug in a read becomes a message, not a dead terminal
            self.post_message(msg.PageFailed(generation, index, as_error(exc)))

    @on(msg.PageLoaded)
    def _page_loaded(self, message: msg.PageLoaded) -> None:
        opening = message.index == 0 and not self.data.window.started
        page = self.data.page_read(message.generation, message.index, message.page, message.token)
        if page is None:
            return
        self.loading = False
        if self._focus_when_loaded:
            self._focus_when_loaded = False
            self.focus()
        top, bottom = self.visible_rows()
        self.data.window.evict(top, bottom)
        self._resized()
        if opening:
            items = page.items
            empty = not items and page.next_cursor is None
            newest, oldest = (items[0].created_at, items[-1].created_at) if items else (None, None)
            self.post_message(self.Opened(self.read_query(), empty, newest, oldest))
            self.post_message(self.Highlighted(self.current))
        self.post_message(self.Changed())

    @on(msg.PageFailed)
    def _page_failed(self, message: msg.PageFailed) -> None:
        if self.data.page_failed(message.generation, message.index):
            self.post_message(self.Failed(message.error, self.data.first_failed))
            self.post_message(self.Changed())  # the status line says it is not live

    @work(thread=True, group="state", exit_on_error=False)
    def load_watermark(self, generation: int, scope: str | None) -> None:
        session = self.session
        try:
            state = StateDB(session.state_path)
            try:
                mark = session.watermarks(state).load(StateKey.of(session.backend, session.consumer, scope))
            finally:
                state.close()
        except MnemoError:
            return  # the marks stay off; the sidebar's count for the scope says `?` for the same cause
        self.post_message(msg.WatermarkLoaded(generation, mark))

    @on(msg.WatermarkLoaded)
    def _watermark_loaded(self, message: msg.WatermarkLoaded) -> None:
        if message.generation == self.data.generation:
            self.set_watermark(message.watermark)

    def set_watermark(self, watermark: Watermark | None) -> None:
        """Mark as new what is new to the reader with this watermark (the rule of `catchup`)."""
        self.watermark = watermark
        self.unread = unread(watermark, self.session.overlap)
        self.painter.clear()
        self.refresh()
        self.post_message(self.Changed())

    # -- live: the reads are the data's (`tui/data/feed.py`); here what they change on screen ----

    def tick(self) -> None:
        """The timer's live check: a poll, unless the push follow brings what is new."""
        self._poll(self.data.tick())

    def check_live(self) -> None:
        """Look for new entries (one poll at a time; none before the first page has arrived)."""
        self._poll(self.data.check_live())

    def _poll(self, poll: Poll | None) -> None:
        if poll is not None:
            self.poll(poll)

    @work(thread=True, group="live", exit_on_error=False)
    def poll(self, poll: Poll) -> None:
        self.post_message(msg.Live(poll_live(self.session, poll)))

    @on(msg.Live)
    def _live(self, message: msg.Live) -> None:
        news = message.news
        if isinstance(news, LiveFound):
            self._live_found(news)
        elif isinstance(news, PushEnded):
            ended = self.data.push_ended(news)
            if ended.changed:
                self.post_message(self.Changed())
            if ended.reread:
                self.removals_seen.publish(None)
                self.post_message(self.Removed(set(), 0, reread=True))
        elif self.data.push_dropped(news):
            self.post_message(self.Changed())

    def _live_found(self, news: LiveFound) -> None:
        data = self.data
        if data.found(news):
            self.post_message(self.Changed())
        if news.generation != data.generation:
            return
        entries = data.arrivals(news)
        if entries is not None:
            if self.at_top:
                self.show_pending()
            self.post_message(self.Arrived(entries, len(data.pending), data.pending_overflow))
        if news.asked:
            self._take_removals(news.removals)
        data.resume_push(news)

    def on_unmount(self) -> None:
        self.data.stop_push()  # closes the push follow's connection: its thread ends

    def _take_removals(self, removals: Removals | None) -> None:
        """Drop the rows removed elsewhere, the cursor staying on its entry (or, if it went, on the next older)."""
        news = self.data.removals(removals, self.cursor)
        if news is None:
            return
        if news.reread:
            self.removals_seen.publish(None)
            self.post_message(self.Removed(set(), 0, reread=True))  # the screen reads the scope again
            return
        if news.elsewhere:  # before the cursor's Highlighted: the screen closes the detail
            self.removals_seen.publish(set(news.elsewhere))  # rows never loaded here may be open in a search dialog
            self.post_message(self.Removed(set(news.elsewhere), news.count))
        if news.count or news.dropped:
            self.painter.clear()
            self._resized()
            self.cursor = self.cursor - news.above
            self.post_message(self.Changed())

    def show_pending(self) -> None:
        """Show the held new entries on top (or re-read the scope when there were too many to hold)."""
        if self.data.pending_overflow:
            self.open(self.data.scope, self.data.include_history)
            return
        if not self.data.show_pending():
            return
        self._resized()
        self.post_message(self.Highlighted(self.current))
        self.post_message(self.Changed())

    # -- shape and movement -----------------------------------------------------------------

    def _resized(self) -> None:
        self.data.refilter()
        self.virtual_size = Size(0, self.row_count + 1)
        self.refresh()
        self.check_needs()

    @property
    def at_top(self) -> bool:
        """Whether the reader is at the top of the feed: cursor on the newest row, viewport not scrolled."""
        return self.cursor == 0 and round(self.scroll_y) == 0

    @property
    def current(self) -> Entry | None:
        return self.entry_at(self.cursor)

    # -- the rows shown: the window, or the loaded entries that match the filter ------------

    @property
    def row_count(self) -> int:
        return self.data.row_count

    def entry_at(self, row: int) -> Entry | None:
        """The entry shown at a row (None while its page is loading)."""
        return self.data.entry_at(row)

    def set_filter(self, value: str) -> None:
        """Show only the loaded entries whose text, author, domain or id contain `value` (any case)."""
        self.data.set_filter(value)
        self.painter.clear()
        self._resized()
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)

    def visible_rows(self) -> tuple[int, int]:
        """First and last row index on screen."""
        top = round(self.scroll_y)
        return top, top + max(self.scrollable_content_region.height, 1) - 1

    def set_room_names(self, names: dict[str, str]) -> None:
        """Show room entries under their rooms' names (the rendered rows are redrawn)."""
        self.room_names = names
        self.painter.clear()
        self.refresh()

    def place(self, domain: str) -> str:
        """A domain as shown: a room's name (with a `#`) rather than its address."""
        name = self.room_names.get(domain)
        return f"#{name}" if name else domain

    def check_needs(self) -> None:
        """Read the pages the viewport needs: evicted ones on screen, or the next one near the end."""
        for request in self.data.needs(*self.visible_rows()):
            self.request_page(request)

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, max(self.row_count - 1, 0)))

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()
        self.post_message(self.Highlighted(self.entry_at(new)))
        self._moved()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self._moved()

    def _moved(self) -> None:
        if self.pending and self.at_top:
            self.show_pending()
        self.check_needs()

    def on_resize(self) -> None:
        # The detail pane opening (or the terminal shrinking) must not hide the row being read.
        self.call_after_refresh(self._scroll_cursor_into_view)
        self.call_after_refresh(self.check_needs)

    def _scroll_cursor_into_view(self) -> None:
        top, bottom = self.visible_rows()
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor > bottom:
            self.scroll_to(y=self.cursor - (bottom - top), animate=False, immediate=True)

    def action_cursor_down(self) -> None:
        self.cursor += 1

    def action_cursor_up(self) -> None:
        self.cursor -= 1

    def action_page_down(self) -> None:
        self.cursor += max(self.scrollable_content_region.height - 1, 1)

    def action_page_up(self) -> None:
        self.cursor -= max(self.scrollable_content_region.height - 1, 1)

    def action_half_page(self, direction: int) -> None:
        self.cursor += direction * max(self.scrollable_content_region.height // 2, 1)

    def action_top(self) -> None:
        self.go_top()

    def action_bottom(self) -> None:
        self.go_bottom()

    def go_top(self) -> None:
        """The newest row, and the new entries held for the reader."""
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)
        self.show_pending()

    def go_bottom(self) -> None:
        self.cursor = self.row_count - 1
        self.scroll_to(y=self.virtual_size.height, animate=False, immediate=True)

    def action_select(self) -> None:
        entry = self.current
        if entry is not None:
            self.post_message(self.Selected(entry))

    def on_click(self, event: Click) -> None:
        self.cursor = round(self.scroll_y) + event.y

    # -- rendering ----------------------------------------------------------------------

    def notify_style_update(self) -> None:
        self._styles.clear()
        self.painter.clear()
        super().notify_style_update()

    def _style(self, name: str) -> Style:
        """The widget's base style plus a component's, computed once per style change (not per line)."""
        style = self._styles.get(name)
        if style is None:
            base = self.rich_style
            style = base if name == "base" else base + self.get_component_rich_style(name)
            self._styles[name] = style
        return style

    def render_line(self, y: int) -> Strip:
        row = round(self.scroll_y) + y
        width = self.scrollable_content_region.width
        count = self.row_count
        if row < count:
            entry = self.entry_at(row)
            if entry is None:
                return Strip([Segment(set_cell_size("   … loading", width), self._style("feed--pending"))], width)
            return self.painter.paint(
                entry,
                width=width,
                now=self.session.clock(),
                fresh=self.unread.is_new(entry.created_at, entry.atom_id),
                cursor=row == self.cursor,
                # Inside a domain or a room every row has the same domain: its column gives way to content.
                show_domain=self.scope is None,
                place=self.place(entry.domain),
            )
        if row == count:
            end = end_line(count, self.window.row_count, bool(self.filter), self.window.at_end)
            return Strip([Segment(set_cell_size(end.center(width), width), self._style("feed--end"))], width)
        return Strip.blank(width, self._style("base"))
