"""Provides `LocalBackend`: the `Backend` protocol over an engine (the embedded store, or any `Engine`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from mnemo_tui.backends import Backend
from mnemo_tui.engine.interface import Engine
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.model import Entry, Page, RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.files import StrPath
    from mnemo_tui.values.plane import Stats
    from mnemo_tui.values.removals import Removals
    from mnemo_tui.values.rooms import Invite, Joined, Room
    from mnemo_tui.values.search import Detail, SearchHit, SearchQuery
    from mnemo_tui.values.secrets import SecretInfo
    from mnemo_tui.values.writes import WriteRequest, WriteResult


class LocalBackend(Backend):
    """An engine in this process, read and written as one principal.

    Args:
        engine: the engine (the caller keeps no other use for it: `close` closes it).
        principal: who reads and writes.
    """

    kind = "embedded"

    def __init__(self, engine: Engine, principal: str = "local") -> None:
        self.engine = engine
        self.identity = engine.identity
        self._principal = principal

    @classmethod
    def open(cls, path: StrPath, principal: str = "local") -> LocalBackend:
        """The embedded store file at `path` (created when missing)."""
        return cls(Store(path), principal)

    @classmethod
    def empty(cls, path: StrPath, principal: str = "local") -> LocalBackend:
        """An empty store held in memory under the identity of `path` (a missing default store, read)."""
        return cls(Store(path, memory=True), principal)

    @property
    def principal(self) -> str:
        return self._principal

    def recent(self, query: RecentQuery) -> Page:
        return self.engine.recent(self._principal, query)

    def snapshot_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        return self.engine.stream_wire(self._principal, query)

    def write(self, request: WriteRequest) -> WriteResult:
        return self.engine.write(self._principal, request)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        return self.engine.search(self._principal, query)

    def get(self, atom_id: str) -> Entry:
        return self.engine.get(self._principal, atom_id)

    def by_prefix(self, prefix: str) -> list[Entry]:
        return self.engine.by_prefix(self._principal, prefix)

    def detail(self, atom_id: str) -> Detail:
        entry = self.engine.get(self._principal, atom_id)
        metadata, external_ref = self.engine.atom_extras([entry.atom_id]).get(entry.atom_id, ({}, None))
        from mnemo_tui.values.search import Detail

        return Detail(entry, metadata, external_ref)

    def delete(self, atom_id: str) -> int:
        return self.engine.delete(self._principal, atom_id)

    def removals(self, scope: str | None, after: int | None, upto: int | None = None) -> Removals:
        from mnemo_tui.values.removals import PAGE, read_pages  # only a --changes pass or the TUI reads removals

        # A page at a time, as over an endpoint: a store with 50,000 tombstones is never one read.
        return read_pages(
            lambda start: self.engine.removals(self._principal, scope, after, upto, limit=PAGE, start=start)
        )

    def feedback(self, atom_ids: list[str], outcome: float) -> int:
        return self.engine.feedback(self._principal, atom_ids, outcome)[0]

    def change_token(self) -> tuple[int, int]:
        return self.engine.change_token()

    def domains(self) -> list[str]:
        return self.engine.domains(self._principal)

    def stats(self) -> Stats:
        return self.engine.stats(self._principal)

    def rooms(self) -> list[Room]:
        return self.engine.list_rooms(self._principal)

    def create_room(self, name: str, description: str | None = None) -> Room:
        return self.engine.create_room(self._principal, name, description)

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite:
        room_id = self.engine.resolve_room(self._principal, room)
        return self.engine.create_invite(
            self._principal, room_id, scope=scope, expires_days=expires_days, max_uses=max_uses
        )

    def join(self, code: str) -> Joined:
        return self.engine.join(self._principal, code)

    def delete_room(self, room: str) -> tuple[str, int]:
        room_id = self.engine.resolve_room(self._principal, room)
        return room_id, self.engine.delete_room(self._principal, room_id)

    def vault_list(self) -> list[SecretInfo]:
        return self.engine.vault_list(self._principal)

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str:
        return self.engine.vault_add(self._principal, alias, context, sealed_b64)

    def vault_sealed(self, alias: str) -> str:
        return self.engine.vault_sealed(self._principal, alias)

    def close(self) -> None:
        self.engine.close()
