"""Provides `LocalBackend`: the `Backend` protocol over the embedded SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mnemo_tui.engine import rooms as room_ops
from mnemo_tui.engine.store import Store
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


class LocalBackend:
    """The embedded store, read and written as one principal."""

    kind = "embedded"

    def __init__(self, path: Path | str, principal: str = "local", *, store: Store | None = None) -> None:
        self.store = store if store is not None else Store(path)
        self.identity = str(self.store.path)
        self._principal = principal

    @property
    def principal(self) -> str:
        return self._principal

    def recent(self, query: RecentQuery) -> Page:
        return self.store.recent(self._principal, query)

    def stream_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        return self.store.stream_wire(self._principal, query)

    def write(self, request: WriteRequest) -> WriteResult:
        return self.store.write(self._principal, request)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        return self.store.search(self._principal, query)

    def get(self, atom_id: str) -> Entry:
        return self.store.get(self._principal, atom_id)

    def delete(self, atom_id: str) -> int:
        return self.store.delete(self._principal, atom_id)

    def change_token(self) -> tuple[int, int]:
        """A token that changes when the store may have changed (see `Store.change_token`)."""
        return self.store.change_token()

    def domains(self) -> list[str]:
        return self.store.domains(self._principal)

    def rooms(self) -> list[Room]:
        return room_ops.list_rooms(self.store, self._principal)

    def create_room(self, name: str, description: str | None = None) -> Room:
        return room_ops.create_room(self.store, self._principal, name, description)

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite:
        room_id = room_ops.resolve_room(self.store, self._principal, room)
        return room_ops.create_invite(
            self.store, self._principal, room_id, scope=scope, expires_days=expires_days, max_uses=max_uses
        )

    def join(self, code: str) -> Joined:
        return room_ops.join(self.store, self._principal, code)

    def vault_list(self) -> list[SecretInfo]:
        return room_ops.vault_list(self.store, self._principal)

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str:
        return room_ops.vault_add(self.store, self._principal, alias, context, sealed_b64)

    def close(self) -> None:
        self.store.close()
