"""Provides live tracking: what is newer than the newest entry shown, read from that instant (inclusive)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mnemo_tui.backends import Backend
from mnemo_tui.model import MAX_LIMIT, Entry, RecentQuery

LIVE_PAGES = 5


Probe = Callable[[], tuple[int, int]]


@dataclass(frozen=True)
class LiveBatch:
    """New entries found by one poll (newest first); `overflow` when there were too many to hold."""

    entries: list[Entry]
    overflow: bool


@dataclass
class LiveTracker:
    """The newest instant shown and the ids shown at it, so that an inclusive poll drops repeats."""

    newest: int | None = None
    ids_at_newest: set[str] = field(default_factory=set)
    token: tuple[int, int] | None = None

    def observe(self, entries: list[Entry]) -> None:
        """Note entries as shown (any order)."""
        for entry in entries:
            if self.newest is None or entry.created_at > self.newest:
                self.newest = entry.created_at
                self.ids_at_newest = {entry.atom_id}
            elif entry.created_at == self.newest:
                self.ids_at_newest.add(entry.atom_id)

    def prime(self, probe: Probe | None) -> None:
        """Take the probe's token before a first read, so a write landing during that read is not missed."""
        self.token = probe() if probe is not None else None

    def changed(self, probe: Probe | None) -> bool:
        """Whether a poll is worth making: always when the backend has no cheap probe (an endpoint)."""
        if probe is None:
            return True
        token = probe()
        if token == self.token:
            return False
        self.token = token
        return True

    def poll(self, backend: Backend, scope: str | None, include_history: bool) -> LiveBatch:
        """Read what is newer than the newest shown: from that instant (inclusive), dropping ids shown.

        Before anything was shown, the first page of the scope is what is new.
        """
        fresh: list[Entry] = []
        cursor: str | None = None
        for _ in range(LIVE_PAGES):
            page = backend.recent(
                RecentQuery(
                    scope=scope, since=self.newest, limit=MAX_LIMIT, cursor=cursor, include_history=include_history
                )
            )
            fresh.extend(e for e in page.items if e.atom_id not in self.ids_at_newest)
            if page.next_cursor is None:
                return LiveBatch(fresh, overflow=False)
            if self.newest is None:
                # Nothing shown yet: one page is the feed's new top; the rest is reached by scrolling.
                return LiveBatch(fresh, overflow=True)
            cursor = page.next_cursor
        return LiveBatch(fresh, overflow=True)
