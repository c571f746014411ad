"""Provides `DelegatingBackend`: a `Backend` that passes every call to another, for wrappers to build on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from mnemo_tui.backends import Backend
from mnemo_tui.backends.remote_consumers import Consumers, consumers_of
from mnemo_tui.values.model import Entry, Page, RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.values.follow import Follow
    from mnemo_tui.values.plane import Stats
    from mnemo_tui.values.removals import Removals
    from mnemo_tui.values.rooms import Invite, Joined, Room
    from mnemo_tui.values.search import Detail, SearchHit, SearchQuery
    from mnemo_tui.values.secrets import SecretInfo
    from mnemo_tui.values.writes import WriteRequest, WriteResult


class DelegatingBackend(Backend):
    """Every operation of the protocol, passed through to `inner` inside `_guard()`.

    Subclasses override the operations they change (a recorder, a lock, a deliberate defect in a
    test) and, to wrap every call at once, `_guard`. `walk_pages` is not passed through (the default,
    None, is kept): a wrapper sees each page of a walk through `recent` unless it takes the stream on.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.identity = inner.identity

    def _guard(self) -> AbstractContextManager[object]:
        return nullcontext()

    def consumers(self) -> Consumers | None:
        """The inner endpoint's consumer calls (docs/consumers.md), each inside `_guard()`; None for any other."""
        found = consumers_of(self.inner)
        if found is None:
            return None
        inner = found.call

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._guard():
                return inner(*args, **kwargs)

        return Consumers(call, found.identity)

    @property
    def principal(self) -> str:
        with self._guard():
            return self.inner.principal

    def recent(self, query: RecentQuery) -> Page:
        with self._guard():
            return self.inner.recent(query)

    def snapshot_wire(self, query: RecentQuery) -> Iterator[list[str]] | None:
        with self._guard():
            return self.inner.snapshot_wire(query)

    def change_token(self) -> tuple[int, int] | None:
        with self._guard():
            return self.inner.change_token()

    def write(self, request: WriteRequest) -> WriteResult:
        with self._guard():
            return self.inner.write(request)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        with self._guard():
            return self.inner.search(query)

    def get(self, atom_id: str) -> Entry:
        with self._guard():
            return self.inner.get(atom_id)

    def delete(self, atom_id: str) -> int:
        with self._guard():
            return self.inner.delete(atom_id)

    def by_prefix(self, prefix: str) -> list[Entry] | None:
        with self._guard():
            return self.inner.by_prefix(prefix)

    def detail(self, atom_id: str) -> Detail:
        with self._guard():
            return self.inner.detail(atom_id)

    def chain(self, atom_id: str) -> list[Entry] | None:
        with self._guard():
            return self.inner.chain(atom_id)

    def follow(self, query: RecentQuery, position: str | None = None) -> Follow | None:
        # Never guarded: opening may wait out the retry policy while the endpoint is down, and a lock held
        # that long would stall every other call (the TUI's reads); the follow has a connection of its
        # own, and its reconnects run outside any guard alike.
        return self.inner.follow(query, position)

    def removals(self, scope: str | None, after: int | None, upto: int | None = None) -> Removals | None:
        with self._guard():
            return self.inner.removals(scope, after, upto)

    def feedback(self, atom_ids: list[str], outcome: float) -> int | None:
        with self._guard():
            return self.inner.feedback(atom_ids, outcome)

    def domains(self) -> list[str]:
        with self._guard():
            return self.inner.domains()

    def stats(self) -> Stats:
        with self._guard():
            return self.inner.stats()

    def rooms(self) -> list[Room]:
        with self._guard():
            return self.inner.rooms()

    def create_room(self, name: str, description: str | None = None) -> Room:
        with self._guard():
            return self.inner.create_room(name, description)

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite:
        with self._guard():
            return self.inner.invite(room, scope=scope, expires_days=expires_days, max_uses=max_uses)

    def join(self, code: str) -> Joined:
        with self._guard():
            return self.inner.join(code)

    def delete_room(self, room: str) -> tuple[str, int]:
        with self._guard():
            return self.inner.delete_room(room)

    def vault_list(self) -> list[SecretInfo]:
        with self._guard():
            return self.inner.vault_list()

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str:
        with self._guard():
            return self.inner.vault_add(alias, context, sealed_b64)

    def vault_sealed(self, alias: str) -> str:
        with self._guard():
            return self.inner.vault_sealed(alias)

    def close(self) -> None:
        with self._guard():
            self.inner.close()
