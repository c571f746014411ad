"""Provides `Recorder`: a `Backend` that passes every call through and keeps the pages it served as evidence."""

from __future__ import annotations

from collections.abc import Callable

from mnemo_tui.backends import Backend
from mnemo_tui.backends.delegate import DelegatingBackend
from mnemo_tui.values.model import Page, RecentQuery, Value


class RunawayWalk(Exception):
    """A walk asked for more pages than it could possibly need: the backend never ends its feed."""


class ServedPage(Value):
    """One page a walk received: the ids in order, and whether a cursor came with it."""

    ids: tuple[str, ...]
    had_cursor: bool


class Recorder(DelegatingBackend):
    """Wraps a backend for one walk: records each page and stops a walk that never ends.

    Args:
        inner: the backend under test.
        max_pages: how many `recent` calls the walk may make before `RunawayWalk` is raised.
        before_page: called with the number of pages already served, before each further page
            is requested (the check writes its probe from here, "after the first page").
    """

    def __init__(self, inner: Backend, *, max_pages: int, before_page: Callable[[int], None] | None = None) -> None:
        super().__init__(inner)
        self.max_pages = max_pages
        self.before_page = before_page
        self.pages: list[ServedPage] = []

    def recent(self, query: RecentQuery) -> Page:
        if len(self.pages) >= self.max_pages:
            raise RunawayWalk(f"the walk was still handed a cursor after {self.max_pages} pages")
        if self.before_page is not None:
            self.before_page(len(self.pages))
        page = self.inner.recent(query)
        self.pages.append(ServedPage(tuple(e.atom_id for e in page.items), page.next_cursor is not None))
        return page

    def close(self) -> None:
        """Leaves the inner backend open: its owner closes it."""
