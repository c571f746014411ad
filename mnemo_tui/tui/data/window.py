"""Provides `FeedWindow`: the rows of one scope's feed as cursor pages, of which only a window is held."""

from __future__ import annotations

from bisect import bisect_right

from mnemo_tui.values.model import Entry, Page, Value


class PageSlot:
    """One page of the walk: the cursor it is read with, its size, and its items while held (the window
    evicts and reloads them, and shrinks the size: a holder, not a value)."""

    __slots__ = ("cursor_in", "items", "next_cursor", "size")

    def __init__(self, cursor_in: str | None, size: int, items: list[Entry] | None, next_cursor: str | None) -> None:
        self.cursor_in = cursor_in
        self.size = size
        self.items = items
        self.next_cursor = next_cursor


class PageRequest(Value):
    """A page the window wants: its index in the walk and the cursor that reads it."""

    index: int
    cursor: str | None


class FeedWindow:
    """The feed of one scope: live entries on top (`head`), then the pages of one cursor walk.

    Every page's cursor and size are remembered (a few bytes each), but only the pages near the
    viewport keep their entries: the first page always, plus `keep_pages` around the reader.
    An evicted page is read again with its own cursor, which lands on the same position.

    Args:
        keep_pages: how many pages beside the first one to hold at most.
    """

    __slots__ = ("_starts", "head", "keep_pages", "slots")

    def __init__(self, keep_pages: int = 8) -> None:
        self.keep_pages = keep_pages
        self.head: list[Entry] = []
        self.slots: list[PageSlot] = []
        self._starts: list[int] = []  # the walked row each page starts at

    # -- shape --------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether the first page has arrived."""
        return bool(self.slots)

    @property
    def at_end(self) -> bool:
        """Whether the walk has reached the end of the feed (a page came back with no cursor)."""
        return bool(self.slots) and self.slots[-1].next_cursor is None

    @property
    def row_count(self) -> int:
        """Rows known so far: live entries plus every page read (held or not)."""
        walked = self._starts[-1] + self.slots[-1].size if self.slots else 0
        return len(self.head) + walked

    @property
    def held_pages(self) -> int:
        return sum(1 for s in self.slots if s.items is not None)

    def entry(self, row: int) -> Entry | None:
        """The entry at a row, or None when its page is not held (or the row is past the end)."""
        if row < 0:
            return None
        if row < len(self.head):
            return self.head[row]
        found = self._locate(row - len(self.head))
        if found is None:
            return None
        slot, offset = found
        items = self.slots[slot].items
        if items is None or offset >= len(items):
            return None
        return items[offset]

    def _locate(self, walked_row: int) -> tuple[int, int] | None:
        if not self.slots or walked_row >= self.row_count - len(self.head):
            return None
        index = bisect_right(self._starts, walked_row) - 1
        # Empty pages share their start with the next one: bisect picks the last of them.
        return index, walked_row - self._starts[index]

    def slot_of_row(self, row: int) -> int | None:
        """The page index a row belongs to (None for live rows and rows past the end)."""
        if row < len(self.head):
            return None
        found = self._locate(row - len(self.head))
        return None if found is None else found[0]

    # -- loading ------------------------------------------------------------------------

    def next_request(self) -> PageRequest | None:
        """The next page of the walk, or None at the end. A short page is never taken for the end."""
        if not self.slots:
            return PageRequest(0, None)
        last = self.slots[-1]
        if last.next_cursor is None:
            return None
        return PageRequest(len(self.slots), last.next_cursor)

    def missing(self, first_row: int, last_row: int) -> list[PageRequest]:
        """The evicted pages that rows `first_row..last_row` (inclusive) fall in."""
        wanted: list[PageRequest] = []
        first = self.slot_of_row(max(first_row, len(self.head)))
        last = self.slot_of_row(min(last_row, self.row_count - 1))
        if first is None or last is None:
            return wanted
        for index in range(first, last + 1):
            slot = self.slots[index]
            if slot.items is None:
                wanted.append(PageRequest(index, slot.cursor_in))
        return wanted

    def add_page(self, index: int, page: Page) -> bool:
        """Store a page read for `index`; returns False when it no longer fits (a stale answer)."""
        if index == len(self.slots):
            expected = None if index == 0 else self.slots[-1].next_cursor
            if index > 0 and expected is None:
                return False
            start = 0 if index == 0 else self._starts[-1] + self.slots[-1].size
            self.slots.append(PageSlot(expected, len(page.items), list(page.items), page.next_cursor))
            self._starts.append(start)
            return True
        if index > len(self.slots) or self.slots[index].items is not None:
            return False
        slot = self.slots[index]
        slot.items = list(page.items)
        if len(page.items) != slot.size:
            # Deletes or supersessions since the first read shrank the page: shift what follows.
            delta = len(page.items) - slot.size
            slot.size = len(page.items)
            for later in range(index + 1, len(self._starts)):
                self._starts[later] += delta
        return True

    def evict(self, first_row: int, last_row: int) -> int:
        """Drop the entries of pages far from rows `first_row..last_row`; returns how many pages went."""
        held = [i for i, s in enumerate(self.slots) if s.items is not None and i != 0]
        if len(held) <= self.keep_pages:
            return 0
        low = self.slot_of_row(max(first_row, len(self.head)))
        high = self.slot_of_row(min(max(last_row, len(self.head)), self.row_count - 1))
        centre = ((low or 0) + (high or 0)) / 2
        held.sort(key=lambda i: abs(i - centre))
        dropped = 0
        for index in held[self.keep_pages :]:
            if low is not None and high is not None and low <= index <= high:
                continue
            self.slots[index].items = None
            dropped += 1
        return dropped

    # -- live entries -------------------------------------------------------------------

    def prepend(self, entries: list[Entry]) -> None:
        """Put newer entries (newest first) on top of the feed."""
        self.head[:0] = entries

    def drop(self, ids: set[str]) -> int:
        """Take the held entries with these ids out (removed elsewhere); returns how many rows went.

        An evicted page keeps its size until it is read again (then it shrinks, as `add_page` says).
        """
        before = self.row_count
        self.head = [e for e in self.head if e.atom_id not in ids]
        shift = 0
        for index, slot in enumerate(self.slots):
            self._starts[index] -= shift
            if slot.items is not None:
                kept = [e for e in slot.items if e.atom_id not in ids]
                shift += len(slot.items) - len(kept)
                slot.items, slot.size = kept, len(kept)
        return before - self.row_count

    def newest(self) -> Entry | None:
        """The newest entry shown, if any."""
        if self.head:
            return self.head[0]
        if self.slots and self.slots[0].items:
            return self.slots[0].items[0]
        return None
