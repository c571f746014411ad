"""Deliberately broken backends for the `check` and `verify` tests, and proof that each has its defect.

Each is a real `LocalBackend` behind a wrapper that implements the `Backend` protocol with one
defect a real server could have; everything else passes through.
"""

from __future__ import annotations

from pathlib import Path

from walk_helpers import pages_of, walk_entries

from mnemo_tui.backends import Backend
from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import (
    Entry,
    Page,
    RecentQuery,
    Room,
    SearchHit,
    SearchQuery,
    WriteRequest,
)


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


def seeded(path: Path, n: int = 7) -> tuple[LocalBackend, list[str]]:
    backend = LocalBackend.open(path, "alice")
    ids = [backend.write(WriteRequest(content=f"entry {i}", domain="d")).atom_id for i in range(n)]
    return backend, ids


def walked(backend: Backend, limit: int = 3) -> list[str]:
    """Every id the backend served in a walk, repeats included."""
    return [e.atom_id for page in pages_of(backend, RecentQuery(scope="d", limit=limit)) for e in page.items]


def test_repeating_wrapper_really_repeats_an_entry_across_pages(tmp_path: Path) -> None:
    inner, ids = seeded(tmp_path / "s.db")
    ids_walked = walked(RepeatsAcrossPages(inner))
    assert len(ids_walked) > len(set(ids_walked)) and set(ids_walked) == set(ids)
    inner.close()


def test_room_dropping_wrapper_really_hides_rooms(tmp_path: Path) -> None:
    inner, _ = seeded(tmp_path / "s.db", 1)
    inner.create_room("team")
    assert [r.name for r in inner.rooms()] == ["team"]
    assert DropsRooms(inner).rooms() == []
    inner.close()


def test_offset_wrapper_repeats_an_entry_when_a_write_lands_mid_walk(tmp_path: Path) -> None:
    inner, ids = seeded(tmp_path / "s.db")
    broken = OffsetPaging(inner)
    first = broken.recent(RecentQuery(scope="d", limit=3))
    inner.write(WriteRequest(content="late", domain="d"))
    second = broken.recent(RecentQuery(scope="d", limit=3, cursor=first.next_cursor))
    assert first.items[-1].atom_id == second.items[0].atom_id
    assert set(walked(broken)) >= set(ids)
    inner.close()


def test_never_ending_and_empty_search_wrappers_have_their_defects(tmp_path: Path) -> None:
    inner, _ = seeded(tmp_path / "s.db", 2)
    assert NeverEnds(inner).recent(RecentQuery(scope="d", cursor="again")).next_cursor == "again"
    assert AnswersEmptySearch(inner).search(SearchQuery(query="")) == []
    try:
        inner.search(SearchQuery(query=""))
    except ValidationError:
        pass
    else:  # pragma: no cover - the real backend must refuse
        raise AssertionError("the real backend answered an empty search")
    inner.close()
