"""Provides `RemovalWatch`: which removals of the shown scope the feed has seen (docs/tui.md, "Removed elsewhere")."""

from __future__ import annotations

from mnemo_tui.values.model import Entry
from mnemo_tui.values.removals import Removals


class RemovalWatch:
    """The bound of the next removals read of one feed generation, and the ids removed so far.

    The bound starts at the newest entry of the first page (or live batch) shown: an entry shown was
    read before any removal of it, whose instant (the bucket's clock, `max(now, last + 1)`) is then
    newer than every entry of the bucket at that read; a bucket commits its removals in the order of
    their times, so no removal is skipped by a bound that moves past an older one. It then moves to the newest removal seen, so each poll asks
    only for what is new.

    `gone` (tombstones newer than the bound were dropped past the retention) on the first answer
    says nothing about the rows shown: dropped tombstones are older than the retention, so they
    predate the read unless the app has been open longer than that. A later `gone`, when the first
    was clear, is news: the feed is read again.
    """

    __slots__ = ("after", "asked", "gone_at_start", "ids")

    def __init__(self) -> None:
        self.after: int | None = None
        self.asked = False
        self.gone_at_start = False
        self.ids: set[str] = set()

    def start(self, shown: list[Entry]) -> None:
        """Set the bound from the first entries shown (a first page, or the first live batch of an empty feed)."""
        if self.after is None and shown:
            self.after = max(e.created_at for e in shown)

    def take(self, removals: Removals) -> set[str] | None:
        """Note an answer; returns the ids it newly removed, or None when the feed must be read again.

        Over an endpoint a poll (`r`, a check) and the push may both bring one removal: only the first
        drops it and says so (a second would read the counts and the activity again for nothing).
        """
        first, self.asked = not self.asked, True
        if first:
            self.gone_at_start = removals.gone
        elif removals.gone and not self.gone_at_start:
            return None
        newest = removals.newest
        if newest is not None and (self.after is None or newest > self.after):
            self.after = newest
        removed = {r.atom_id for r in removals.items} - self.ids
        self.ids |= removed
        return removed

    def keep(self, entries: list[Entry]) -> list[Entry]:
        """Entries without those removed (a page read before a removal seen, arriving after it)."""
        return [e for e in entries if e.atom_id not in self.ids] if self.ids else entries
