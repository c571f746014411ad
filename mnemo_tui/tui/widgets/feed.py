"""Provides `FeedView`: the feed of one scope, which owns its page window, its page reads and its live polls."""

from __future__ import annotations

from typing import ClassVar, Self

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

from mnemo_tui.errors import MnemoError, RemovalsGone
from mnemo_tui.model import Entry, RecentQuery, Watermark
from mnemo_tui.removals import Removals
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.tui import messages as msg
from mnemo_tui.tui.data.live import PushHandle, open_push
from mnemo_tui.tui.data.removed import RemovalWatch
from mnemo_tui.tui.data.window import FeedWindow, PageRequest
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.rows import AGE_SECONDS, RowPainter, end_line
from mnemo_tui.walk import LiveTracker, unread

# Load the next page when the reader is this many rows from the last one known.
PREFETCH_ROWS = 40
# New entries held while the reader is away from the top; past this the scope is re-read.
PENDING_CAP = 500


class FeedView(ScrollView, can_focus=True):
    """The rows of one scope, newest first, with a cursor row.

    It reads its own pages (one cursor walk, a window of them held), its consumer's watermark (the
    `●` marks) and what is new (live polls), in thread workers that post their result to it; it
    tells the screen what a person should see next through the messages below.
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
        self.scope: str | None = None
        self.include_history = False
        self.generation = 0
        self.window = FeedWindow(keep_pages=session.keep_pages)
        self.tracker = LiveTracker(session.overlap)
        self.removed = RemovalWatch()
        # Every removal of the scope seen, shown or not (None: dropped unseen, read again): for the search dialog.
        self.removals_seen: Signal[set[str] | None] = Signal(self, "removals_seen")
        # False once the backend answered that it keeps no tombstones (the hosted service): never asked again.
        self.tombstones = True
        self.pending: list[Entry] = []
        self.pending_overflow = False
        self.watermark: Watermark | None = None
        self.unread = unread(None, 0)
        self.live_error: str | None = None
        # The first page failed: nothing is shown and nothing polled (live starts with a first page) until `r`.
        self.first_failed = False
        self.loading = True
        self._focus_when_loaded = False
        self.room_names: dict[str, str] = {}
        self.filter = ""
        self._matches: list[Entry] = []
        self._inflight: set[int] = set()
        self._live_busy = False
        # The push follow of the current generation (an endpoint that offers it): read by its own thread.
        self.offers_push = session.backend.kind == "remote"
        self._push: PushHandle | None = None
        self.pushing = False
        # The push's stream dropped and its follow is reconnecting (the timer still leaves it to the push).
        self.reconnecting = False
        self._styles: dict[str, Style] = {}
        self.painter = RowPainter(self._style)

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
        self.scope, self.include_history = scope, include_history
        self.stop_push()
        self.generation += 1
        self.window = FeedWindow(keep_pages=self.session.keep_pages)
        self.tracker = LiveTracker(self.session.overlap)
        self.removed = RemovalWatch()
        self.pending, self.pending_overflow = [], False
        self.filter, self._matches = "", []
        self._inflight.clear()
        self.set_watermark(None)
        self.loading = True
        self.first_failed = False
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)
        self.painter.clear()
        self._resized()
        self.request_page(PageRequest(0, None))
        self.load_watermark(self.generation, scope)

    def read_query(self, cursor: str | None = None) -> RecentQuery:
        """The feed's read of its scope (at a cursor)."""
        return RecentQuery(
            scope=self.scope, limit=self.session.page_size, cursor=cursor, include_history=self.include_history
        )

    def request_page(self, request: PageRequest) -> None:
        if request.index not in self._inflight:
            self._inflight.add(request.index)
            self.load_page(self.generation, request.index, self.read_query(request.cursor))

    @work(thread=True, group="feed", exit_on_error=False)
    def load_page(self, generation: int, index: int, query: RecentQuery) -> None:
        session = self.session
        try:
            token = session.probe() if index == 0 else None
            self.post_message(msg.PageLoaded(generation, index, session.backend.recent(query), token))
        except Exception as exc:  # noqa: BLE001 - even a bug in a read becomes a message, not a dead terminal
            self.post_message(msg.PageFailed(generation, index, msg.as_error(exc)))

    @on(msg.PageLoaded)
    def _page_loaded(self, message: msg.PageLoaded) -> None:
        if message.generation != self.generation:
            return
        self._inflight.discard(message.index)
        first = not self.window.started
        if message.index == 0 and first:
            self.tracker.token = message.token
        page = message.page
        if self.removed.ids:  # read before a removal the feed has already seen
            page = page.replace(items=self.removed.keep(page.items))
        if not self.window.add_page(message.index, page):
            return
        self.tracker.observe(page.items)
        if message.index == 0 and first:
            self.removed.start(page.items)
            self.start_push()
        self.loading = False
        if self._focus_when_loaded:
            self._focus_when_loaded = False
            self.focus()
        top, bottom = self.visible_rows()
        self.window.evict(top, bottom)
        self._resized()
        if message.index == 0 and first:
            items = page.items
            empty = not items and page.next_cursor is None
            newest, oldest = (items[0].created_at, items[-1].created_at) if items else (None, None)
            self.post_message(self.Opened(self.read_query(), empty, newest, oldest))
            self.post_message(self.Highlighted(self.current))
        self.post_message(self.Changed())

    @on(msg.PageFailed)
    def _page_failed(self, message: msg.PageFailed) -> None:
        if message.generation == self.generation:
            self._inflight.discard(message.index)
            self.first_failed = not self.window.started
            self.post_message(self.Failed(message.error, self.first_failed))
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
        if message.generation == self.generation:
            self.set_watermark(message.watermark)

    def set_watermark(self, watermark: Watermark | None) -> None:
        """Mark as new what is new to the reader with this watermark (the rule of `catchup`)."""
        self.watermark = watermark
        self.unread = unread(watermark, self.session.overlap)
        self.painter.clear()
        self.refresh()
        self.post_message(self.Changed())

    # -- live -----------------------------------------------------------------------------

    def tick(self) -> None:
        """The timer's live check: a poll, unless the push follow brings what is new."""
        if not self.pushing:
            self.check_live()

    def check_live(self) -> None:
        """Look for new entries (one poll at a time; none before the first page has arrived)."""
        if self._live_busy or not self.window.started:
            return
        self._live_busy = True
        # Removals are asked for only with something shown to drop, and of a backend that keeps them.
        after = self.removed.after if self.tombstones else None
        self.poll(self.generation, self.tracker, self.scope, self.include_history, after)

    @work(thread=True, group="live", exit_on_error=False)
    def poll(self, generation: int, tracker: LiveTracker, scope: str | None, history: bool, after: int | None) -> None:
        backend = self.session.backend
        batch, removals, error = None, None, None
        try:
            if not tracker.changed(self.session.probe):
                self.post_message(msg.LiveFound(generation, None))
                return
            batch = tracker.poll(backend, scope, history)
        except Exception as exc:  # noqa: BLE001 - a failing poll pauses live updates; it never closes the app
            error = msg.as_error(exc)
        # After the entries: an entry written and removed between two polls is dropped in the same one. Asked
        # even when they failed: a room deleted elsewhere refuses its feed but tells its former members so.
        asked = after is not None
        if asked:
            try:
                removals = backend.removals(scope, after)
            except Exception as exc:  # noqa: BLE001 - as above
                asked, error = False, error or msg.as_error(exc)
        self.post_message(msg.LiveFound(generation, batch, removals, asked, error))

    @on(msg.LiveFound)
    def _live_found(self, message: msg.LiveFound) -> None:
        if not message.pushed:
            self._live_busy = False
        elif message.generation == self.generation and (self.reconnecting or not self.pushing):
            self.pushing, self.reconnecting = True, False
            self.post_message(self.Changed())  # the status line says `live (pushed)`
        error = None if message.error is None else message.error.message
        if self.live_error != error:
            self.live_error = error
            self.post_message(self.Changed())
        batch = message.batch
        if message.generation != self.generation:
            return
        # A poll and the push may both bring an entry: what was shown meanwhile is dropped here.
        entries = self.tracker.take(batch.entries) if batch is not None else []
        if batch is not None and (entries or batch.overflow):
            self.removed.start(entries)
            self.pending[:0] = entries
            self.pending_overflow = self.pending_overflow or batch.overflow or len(self.pending) > PENDING_CAP
            del self.pending[PENDING_CAP:]
            if self.at_top:
                self.show_pending()
            self.post_message(self.Arrived(entries, len(self.pending), self.pending_overflow))
        if message.asked:
            self._take_removals(message.removals)
        if not message.pushed and error is None and self.offers_push and self._push is None:
            self.start_push()  # the push had failed and the endpoint answers again: back to pushing

    # -- push: an endpoint's follow, read by a thread of its own ----------------------------------

    def start_push(self) -> None:
        """Over an endpoint that offers the push follow, read it for this generation in a thread of its own
        (`live.open_push`); `stop_push` (a new generation, the feed unmounted) closes its connection."""
        if not self.offers_push or self._push is not None or not self.window.started:
            return
        query = self.tracker.query(self.read_query())
        after = self.removed.after if self.tombstones else None
        self._push = open_push(self.session.backend, self.generation, query, after, self.post_message)

    def stop_push(self) -> None:
        push, self._push = self._push, None
        self.pushing = self.reconnecting = False
        if push is not None:
            push.close()

    def on_unmount(self) -> None:
        self.stop_push()

    @on(msg.PushEnded)
    def _push_ended(self, message: msg.PushEnded) -> None:
        if message.generation != self.generation:
            return
        if self.pushing:
            self.post_message(self.Changed())
        self._push, self.pushing, self.reconnecting = None, False, False
        if not message.offered:
            self.offers_push = False  # this backend has no push: the timer's poll it is
            return
        if isinstance(message.error, RemovalsGone):
            self.removals_seen.publish(None)
            self.post_message(self.Removed(set(), 0, reread=True))  # resumed past the removals kept: read again
            return
        if message.error is not None and self.live_error != message.error.message:
            self.live_error = message.error.message  # live pauses; the timer's poll takes over and retries
            self.post_message(self.Changed())

    @on(msg.PushDropped)
    def _push_dropped(self, message: msg.PushDropped) -> None:
        if message.generation == self.generation and self._push is not None and not self.reconnecting:
            self.reconnecting = True  # the status line stops saying `live (pushed)` until the next event
            self.post_message(self.Changed())

    def _take_removals(self, removals: Removals | None) -> None:
        """Drop the rows removed elsewhere, the cursor staying on its entry (or, if it went, on the next older)."""
        if removals is None:
            self.tombstones = False
            return
        ids = self.removed.take(removals)
        if ids is None:
            self.removals_seen.publish(None)
            self.post_message(self.Removed(set(), 0, reread=True))  # the screen reads the scope again
            return
        if not ids:
            return
        # This app's own deletes (`d`) leave the feed as well, but are no removal elsewhere: the delete said so.
        here = ids & self.session.deleted_here
        elsewhere = ids - here
        above = sum(1 for row in range(self.cursor) if (e := self.entry_at(row)) is not None and e.atom_id in ids)
        count, dropped = self._drop(elsewhere), self._drop(here)
        if elsewhere:  # before the cursor's Highlighted: the screen closes the detail
            self.removals_seen.publish(elsewhere)  # rows never loaded here may be open in a search dialog
            self.post_message(self.Removed(elsewhere, count))
        if count or dropped:
            self.painter.clear()
            self._resized()
            self.cursor = self.cursor - above
            self.post_message(self.Changed())

    def _drop(self, ids: set[str]) -> int:
        """Take these entries out of the rows and of those held as new; returns how many went."""
        held = len(self.pending)
        self.pending = [e for e in self.pending if e.atom_id not in ids]
        return self.window.drop(ids) + held - len(self.pending)

    def show_pending(self) -> None:
        """Show the held new entries on top (or re-read the scope when there were too many to hold)."""
        if self.pending_overflow:
            self.open(self.scope, self.include_history)
            return
        if not self.pending:
            return
        self.window.prepend(self.pending)
        self.pending = []
        self._resized()
        self.post_message(self.Highlighted(self.current))
        self.post_message(self.Changed())

    # -- shape and movement -----------------------------------------------------------------

    def _resized(self) -> None:
        if self.filter:
            self._matches = self._matching()
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
        return len(self._matches) if self.filter else self.window.row_count

    def entry_at(self, row: int) -> Entry | None:
        """The entry shown at a row (None while its page is loading)."""
        if self.filter:
            return self._matches[row] if 0 <= row < len(self._matches) else None
        return self.window.entry(row)

    def set_filter(self, value: str) -> None:
        """Show only the loaded entries whose text, author, domain or id contain `value` (any case)."""
        self.filter = value.strip().casefold()
        self._matches = []
        self.painter.clear()
        self._resized()
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)

    def _matching(self) -> list[Entry]:
        wanted = self.filter
        loaded = [*self.window.head, *(e for slot in self.window.slots for e in slot.items or ())]
        return [e for e in loaded if wanted in f"{e.content}\n{e.author}\n{e.domain}\n{e.atom_id}".casefold()]

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
        if self.filter:
            return  # the filter narrows what is loaded; `enter` asks the server
        top, bottom = self.visible_rows()
        for request in self.window.missing(top, bottom):
            self.request_page(request)
        nxt = self.window.next_request()
        if nxt is not None and self.window.started and bottom + PREFETCH_ROWS >= self.window.row_count:
            self.request_page(nxt)

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
