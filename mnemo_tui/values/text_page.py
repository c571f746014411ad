"""Provides `TextPage`: a feed page held as its items' own texts, with what a walk checks, its entries built on demand."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import floordiv, sub

from mnemo_tui.values.model import Entry, Page

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)


def _us(when: datetime) -> int:
    return (when - _EPOCH) // _ONE_US


class TextPage:
    """A page of the feed as its items came (`backends/remote_wire.py` makes them, checked): their own bytes, each
    on its line (UTF-8, never re-encoded), and each one's id and time from the one decode that checked it.

    A walk checks a page by its ids and its last position, and prints it with one write (`ndjson`); its `Entry`
    values are built only when something asks for them (`items`: a table, a filter, a repeat), once: so a plain
    class, not a `Value`.

    Attributes:
        text: the items' texts, each followed by `\\n` (none holds one), in the page's order.
        ids: each item's `atom_id`.
        times: each item's `created_at`, aware (UTC).
        next_cursor: the cursor of the next page (None at the end).
    """

    __slots__ = ("_items", "ids", "next_cursor", "text", "times")

    def __init__(self, text: bytes, ids: list[str], times: list[datetime], next_cursor: str | None) -> None:
        self.text = text
        self.ids = ids
        self.times = times
        self.next_cursor = next_cursor
        self._items: list[Entry] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[str]:
        """The items' texts, as a chunk of wire texts is read (`catchup.walk.stream_wire`)."""
        return iter(self.text.decode().split("\n")[:-1])

    @property
    def newest(self) -> int | None:
        """The newest instant of the page (None when it is empty)."""
        return _us(max(self.times)) if self.times else None

    @property
    def last(self) -> tuple[int, str] | None:
        """The last item's instant and id (None when the page is empty)."""
        return (_us(self.times[-1]), self.ids[-1]) if self.ids else None

    @property
    def items(self) -> list[Entry]:
        """The page's entries, newest first (built once)."""
        if self._items is None:
            instants = map(floordiv, map(sub, self.times, repeat(_EPOCH)), repeat(_ONE_US))  # in C: no frame an item
            # What `Entry._make` does (`tuple.__new__`), called by `map` without a Python frame per item.
            self._items = list(map(tuple.__new__, repeat(Entry), zip(instants, self.ids, self, strict=True)))
        return self._items

    def page(self) -> Page:
        """The same page as `Page` values."""
        return Page(self.items, self.next_cursor)

    def ndjson(self) -> bytes:
        """The items' texts, each on its own line (what `--format ndjson` prints), in one piece."""
        return self.text

    def joined(self) -> bytes:
        """The items' texts joined by commas (a JSON array's inside)."""
        return self.text[:-1].replace(b"\n", b",")
