"""Provides `FeedView`: the feed as a line-API widget that renders only the rows on screen."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from mnemo_tui import text, timefmt
from mnemo_tui.model import Entry, Watermark
from mnemo_tui.tui.data.window import FeedWindow
from mnemo_tui.walk import unread

# Load the next page when the reader is this many rows from the last one known.
PREFETCH_ROWS = 40


def headline(entry: Entry) -> str:
    """The entry's first line as a feed shows it: a Markdown heading's `#` marks dropped."""
    line = entry.first_line
    return line.lstrip("#").strip() or line if line.startswith("#") else line


def absolute(us: int) -> str:
    """`2026-11-30 07:45` (UTC)."""
    return timefmt.to_iso(us)[:16].replace("T", " ")


class FeedView(ScrollView, can_focus=True):
    """The rows of a `FeedWindow`, newest first, with a cursor row; asks for pages as the reader scrolls."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "feed--cursor",
        "feed--new",
        "feed--time",
        "feed--author",
        "feed--domain",
        "feed--text",
        "feed--end",
        "feed--pending",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "cursor_down", "Down", show=False),
        Binding("k,up", "cursor_up", "Up", show=False),
        Binding("pagedown,space", "page_down", "Page down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("enter", "select", "Open", show=True),
    ]

    cursor: reactive[int] = reactive(0, always_update=True)

    class Highlighted(Message):
        """The cursor moved onto an entry (None while its page is loading)."""

        def __init__(self, entry: Entry | None, row: int) -> None:
            super().__init__()
            self.entry = entry
            self.row = row

    class Selected(Message):
        """The reader pressed enter on an entry."""

        def __init__(self, entry: Entry) -> None:
            super().__init__()
            self.entry = entry

    class NeedRows(Message):
        """The rows on screen (or just below) are not held: read the next page or the evicted ones."""

        def __init__(self, first: int, last: int) -> None:
            super().__init__()
            self.first = first
            self.last = last

    class Moved(Message):
        """The viewport or cursor moved (the screen decides whether the reader left the top)."""

    def __init__(self, window: FeedWindow, clock: Callable[[], int], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window = window
        self.clock = clock
        self.watermark: Watermark | None = None
        self.unread = unread(None, 0)
        self.loading = True
        self.room_names: dict[str, str] = {}
        self._styles: dict[str, Style] = {}
        # Rendered rows by what they show; a repaint of an unchanged screen builds no strips.
        self._lines: LRUCache[tuple[str, bool, int, str, bool], Strip] = LRUCache(256)

    # -- data ---------------------------------------------------------------------------

    def set_watermark(self, watermark: Watermark | None, overlap: int) -> None:
        """Mark as new what is new to the reader with this watermark (the rule of `catchup`)."""
        self.watermark = watermark
        self.unread = unread(watermark, overlap)
        self._lines.clear()
        self.refresh()

    def set_window(self, window: FeedWindow) -> None:
        """Show another window (a new scope or a reload) from the top."""
        self.window = window
        self.loading = True
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)
        self.rows_changed()

    def rows_changed(self, shift: int = 0) -> None:
        """The window gained rows (`shift` of them on top): resize, keep the cursor on its entry."""
        if shift and self.cursor:
            self.cursor = self.cursor + shift
        self.virtual_size = Size(0, self.window.row_count + 1)
        self.refresh()
        self.check_needs()

    @property
    def at_top(self) -> bool:
        """Whether the reader is at the top of the feed: cursor on the newest row, viewport not scrolled."""
        return self.cursor == 0 and round(self.scroll_y) == 0

    @property
    def current(self) -> Entry | None:
        return self.window.entry(self.cursor)

    def visible_rows(self) -> tuple[int, int]:
        """First and last row index on screen."""
        top = round(self.scroll_y)
        return top, top + max(self.scrollable_content_region.height, 1) - 1

    def set_room_names(self, names: dict[str, str]) -> None:
        """Show room entries under their rooms' names (the rendered rows are redrawn)."""
        self.room_names = names
        self._lines.clear()
        self.refresh()

    def place(self, domain: str) -> str:
        """A domain as shown: a room's name (with a `#`) rather than its address."""
        name = self.room_names.get(domain)
        return f"#{name}" if name else domain

    def check_needs(self) -> None:
        """Ask for the pages the viewport needs: evicted ones on screen, or the next one near the end."""
        first, last = self.visible_rows()
        wants_next = not self.window.at_end and last + PREFETCH_ROWS >= self.window.row_count
        if self.window.missing(first, last) or (wants_next and self.window.started):
            self.post_message(self.NeedRows(first, last))

    # -- movement -----------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, max(self.window.row_count - 1, 0)))

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()
        self.post_message(self.Highlighted(self.window.entry(new), new))
        self.post_message(self.Moved())
        self.check_needs()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Moved())
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

    def go_top(self) -> None:
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)

    def go_bottom(self) -> None:
        self.cursor = self.window.row_count - 1
        self.scroll_to(y=self.virtual_size.height, animate=False, immediate=True)

    def action_select(self) -> None:
        entry = self.current
        if entry is not None:
            self.post_message(self.Selected(entry))

    def on_click(self, event: object) -> None:
        offset = getattr(event, "y", None)
        if isinstance(offset, int):
            self.cursor = round(self.scroll_y) + offset

    # -- rendering ----------------------------------------------------------------------

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._lines.clear()
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
        count = self.window.row_count
        if row < count:
            entry = self.window.entry(row)
            if entry is None:
                return Strip([Segment(set_cell_size("   … loading", width), self._style("feed--pending"))], width)
            return self._entry_line(entry, row == self.cursor, width)
        if row == count:
            if self.window.at_end:
                text = "── end of the feed ──" if count else ""
            else:
                text = "── loading older entries … ──" if (self.loading or not self.window.at_end) else ""
            return Strip([Segment(set_cell_size(text.center(width), width), self._style("feed--end"))], width)
        return Strip.blank(width, self._style("base"))

    def _entry_line(self, entry: Entry, is_cursor: bool, width: int) -> Strip:
        age = timefmt.relative(entry.created_at, self.clock())
        fresh = self.unread.is_new(entry.created_at, entry.atom_id)
        key = (entry.atom_id, is_cursor, width, age, fresh)
        cached = self._lines.get(key)
        if cached is not None:
            return cached
        cols: list[tuple[str, Style]] = [
            (" ● " if fresh else "   ", self._style("feed--new")),
            (age.rjust(8) + "  ", self._style("feed--time")),
        ]
        if width >= 80:
            cols.append((absolute(entry.created_at) + "  ", self._style("feed--time")))
        if width >= 60:
            wide = width >= 95
            author, domain = (
                set_cell_size(text.line(entry.author), 18 if wide else 14),
                set_cell_size(text.line(self.place(entry.domain)), 14 if wide else 12),
            )
            cols.append((author + "  ", self._style("feed--author")))
            cols.append((domain + "  ", self._style("feed--domain")))
        used = sum(len(text) for text, _ in cols)
        cols.append((set_cell_size(text.line(headline(entry)), max(width - used, 0)), self._style("feed--text")))
        if is_cursor:
            cursor = self._style("feed--cursor")
            cols = [(text, style + cursor) for text, style in cols]
        strip = Strip([Segment(text, style) for text, style in cols], width).crop(0, width)
        self._lines[key] = strip
        return strip
