"""Walk helpers for tests: the product's one `Walk`, with the raw pages the backend served recorded."""

from __future__ import annotations

from mnemo_tui.backends import Backend
from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.catchup.walk import Walk
from mnemo_tui.values.model import Entry, Page, RecentQuery


class PageLog(DelegatingBackend):
    """Passes every call through and keeps each feed page exactly as the backend served it."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.pages: list[Page] = []

    def recent(self, query: RecentQuery) -> Page:
        page = self.inner.recent(query)
        self.pages.append(page)
        return page

    def close(self) -> None:
        """Leaves the inner backend open: its owner closes it."""


def pages_of(backend: Backend, query: RecentQuery) -> list[Page]:
    """Every page a walk of `query` read, as served (cursors included)."""
    log = PageLog(backend)
    for _ in Walk(log, query).pages():
        pass
    return log.pages


def walk_entries(backend: Backend, query: RecentQuery) -> list[Entry]:
    """Every entry a walk of `query` yields, in order."""
    return [entry for fresh in Walk(backend, query).pages() for entry in fresh]


def walk_ids(backend: Backend, query: RecentQuery) -> list[str]:
    """The ids a walk of `query` yields, in order."""
    return [entry.atom_id for entry in walk_entries(backend, query)]
