"""Provides live tracking: what is newer than the newest entry shown, read by the walk from that instant."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mnemo_tui.backends import Backend
from mnemo_tui.model import MAX_LIMIT, Entry, RecentQuery
from mnemo_tui.walk import Frontier, Walk, start_of

LIVE_PAGES = 5

Probe = Callable[[], tuple[int, int] | None]


@dataclass(frozen=True)
class LiveBatch:
    """New entries found by one poll (newest first); `overflow` when there were too many to hold."""

    entries: list[Entry]
    overflow: bool


class LiveTracker:
    """The newest instant shown and the ids shown at (or, on an endpoint, within the overlap below) it.

    A poll reads from there, inclusive, and drops what is shown: an entry is never shown twice,
    and a late commit inside the overlap is not missed. Nothing at or below the oldest entry
    shown (the floor) counts as new: reading on by cursor reaches it.

    Args:
        overlap: the walk's overlap for this backend (see `walk.default_overlap`).
    """

    def __init__(self, overlap: int = 0) -> None:
        self.overlap = overlap
        self.frontier = Frontier(overlap)
        self.floor: tuple[int, str] | None = None
        self.token: tuple[int, int] | None = None

    @property
    def newest(self) -> int | None:
        """The newest instant shown."""
        return self.frontier.newest

    @property
    def ids_at_newest(self) -> set[str]:
        """The ids shown at the newest instant (and, with an overlap, within it below)."""
        return set(self.frontier.ids)

    def observe(self, entries: list[Entry]) -> None:
        """Note entries as shown (any order): every page the feed holds, and every live batch."""
        for entry in entries:
            self.frontier.observe(entry.created_at, entry.atom_id)
            position = (entry.created_at, entry.atom_id)
            if self.floor is None or position < self.floor:
                self.floor = position

    def changed(self, probe: Probe) -> bool:
        """Whether a poll is worth making: always when the backend has no cheap probe (an endpoint)."""
        token = probe()
        if token is None:
            return True
        if token == self.token:
            return False
        self.token = token
        return True

    def poll(self, backend: Backend, scope: str | None, include_history: bool) -> LiveBatch:
        """Read what is newer than the newest shown (the walk from the shown frontier, ids shown dropped).

        Before anything was shown, the first page of the scope is what is new.
        """
        start = start_of(self.frontier.mark(), self.overlap)
        floor = self.floor
        since = start.since if floor is None or start.since is None else max(start.since, floor[0])
        query = RecentQuery(scope=scope, since=since, limit=MAX_LIMIT, include_history=include_history)
        # Nothing shown yet: one page is the feed's new top; the rest is reached by scrolling.
        pages = LIVE_PAGES if self.frontier.newest is not None else 1
        walk = Walk(backend, query, held=start.held, overlap=self.overlap, max_pages=pages)
        fresh = [
            entry
            for page in walk.pages()
            for entry in page
            if floor is None or (entry.created_at, entry.atom_id) > floor
        ]
        return LiveBatch(fresh, overflow=not walk.progress.done)
