"""Provides `Recorder`: a `Backend` that passes every call through and keeps the pages it served as evidence."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mnemo_tui.backends import Backend
from mnemo_tui.model import (
    Entry,
    Invite,
    Joined,
    Page,
    RecentQuery,
    Room,
    SearchHit,
    SearchQuery,
    SecretInfo,
    WriteRequest,
    WriteResult,
)


class RunawayWalk(Exception):
    """A walk asked for more pages than it could possibly need: the backend never ends its feed."""


@dataclass(frozen=True)
class ServedPage:
    """One page a walk received: the ids in order, and whether a cursor came with it."""

    ids: tuple[str, ...]
    had_cursor: bool


class Recorder:
    """Wraps a backend for one walk: records each page and stops a walk that never ends.

    Args:
        inner: the backend under test.
        max_pages: how many `recent` calls the walk may make before `RunawayWalk` is raised.
        before_page: called with the number of pages already served, before each further page
            is requested (the check writes its probe from here, "after the first page").
    """

    def __init__(self, inner: Backend, *, max_pages: int, before_page: Callable[[int], None] | None = None) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.identity = inner.identity
        self.max_pages = max_pages
        self.before_page = before_page
        self.pages: list[ServedPage] = []

    @property
    def principal(self) -> str:
        return self.inner.principal

    def recent(self, query: RecentQuery) -> Page:
        if len(self.pages) >= self.max_pages:
            raise RunawayWalk(f"the walk was still handed a cursor after {self.max_pages} pages")
        if self.before_page is not None:
            self.before_page(len(self.pages))
        page = self.inner.recent(query)
        self.pages.append(ServedPage(tuple(e.atom_id for e in page.items), page.next_cursor is not None))
        return page

    def stream_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        return self.inner.stream_wire(query)

    def write(self, request: WriteRequest) -> WriteResult:
        return self.inner.write(request)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        return self.inner.search(query)

    def get(self, atom_id: str) -> Entry:
        return self.inner.get(atom_id)

    def delete(self, atom_id: str) -> int:
        return self.inner.delete(atom_id)

    def domains(self) -> list[str]:
        return self.inner.domains()

    def rooms(self) -> list[Room]:
        return self.inner.rooms()

    def create_room(self, name: str, description: str | None = None) -> Room:
        return self.inner.create_room(name, description)

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite:
        return self.inner.invite(room, scope=scope, expires_days=expires_days, max_uses=max_uses)

    def join(self, code: str) -> Joined:
        return self.inner.join(code)

    def vault_list(self) -> list[SecretInfo]:
        return self.inner.vault_list()

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str:
        return self.inner.vault_add(alias, context, sealed_b64)

    def close(self) -> None:
        """Leaves the inner backend open: its owner closes it."""
