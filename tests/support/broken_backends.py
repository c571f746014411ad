"""Deliberately broken backends for the `check` and `verify` tests (their defects are proven in proof/).

Each is a real `LocalBackend` behind a wrapper that implements the `Backend` protocol with one
defect a real server could have; everything else passes through.
"""

from __future__ import annotations

from mnemo_tui.backends import Backend
from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.values.model import Entry, Page, RecentQuery
from mnemo_tui.values.rooms import Room
from mnemo_tui.values.search import SearchHit, SearchQuery
from tests.support.walk import walk_entries


class Wrapper(DelegatingBackend):
    """Passes every call of the protocol through to a real backend."""


class RepeatsAcrossPages(Wrapper):
    """Hands back the last entry of the previous page again at the top of each continued page."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self._last: Entry | None = None

    def recent(self, query: RecentQuery) -> Page:
        page = self.inner.recent(query)
        items = list(page.items)
        if query.cursor is not None and self._last is not None:
            items.insert(0, self._last)
        if page.items:
            self._last = page.items[-1]
        return Page(items=items, next_cursor=page.next_cursor)


class DropsRooms(Wrapper):
    """Lists no rooms, so an empty report built from the listing names none of them."""

    def rooms(self) -> list[Room]:
        return []


class OffsetPaging(Wrapper):
    """Pages by position (`o<offset>`), as LIMIT/OFFSET does: a write at the top shifts every later page."""

    def recent(self, query: RecentQuery) -> Page:
        offset = int(query.cursor[1:]) if query.cursor else 0
        base = RecentQuery(
            scope=query.scope,
            since=query.since,
            until=query.until,
            exclude_author=query.exclude_author,
            limit=100,
            include_history=query.include_history,
        )
        everything = walk_entries(self.inner, base)
        items = everything[offset : offset + query.limit]
        more = len(everything) > offset + query.limit
        return Page(items=items, next_cursor=f"o{offset + query.limit}" if more else None)


class NeverEnds(Wrapper):
    """Always hands back a cursor, even past the end of the feed."""

    def recent(self, query: RecentQuery) -> Page:
        page = self.inner.recent(RecentQuery(scope=query.scope, since=query.since, limit=query.limit))
        return Page(items=page.items if query.cursor is None else [], next_cursor="again")


class AnswersEmptySearch(Wrapper):
    """Answers a search with no query instead of refusing it."""

    def search(self, query: SearchQuery) -> list[SearchHit]:
        if not query.query.strip():
            return []
        return self.inner.search(query)
