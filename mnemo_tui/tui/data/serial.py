"""Provides `SerialBackend`: a Backend wrapper that lets one thread at a time call the backend it wraps."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

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


class SerialBackend:
    """The TUI's workers run on several threads; backends are synchronous and need not be thread-safe.

    Each call holds the lock for that call only, so a long catch-up walk interleaves with the
    feed's page loads instead of blocking them.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.identity = inner.identity
        self._lock = threading.RLock()

    @property
    def principal(self) -> str:
        with self._lock:
            return self.inner.principal

    @property
    def probe(self) -> Callable[[], tuple[int, int]] | None:
        """The wrapped backend's cheap change probe (`change_token`), or None when it has none."""
        inner_probe = getattr(self.inner, "change_token", None)
        if not callable(inner_probe):
            return None

        def locked() -> tuple[int, int]:
            with self._lock:
                token: tuple[int, int] = inner_probe()
                return token

        return locked

    def recent(self, query: RecentQuery) -> Page:
        with self._lock:
            return self.inner.recent(query)

    def stream_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        with self._lock:
            chunks = self.inner.stream_wire(query)
        while True:
            # One chunk per lock: a long stream interleaves with other calls and is never held whole.
            with self._lock:
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield chunk

    def write(self, request: WriteRequest) -> WriteResult:
        with self._lock:
            return self.inner.write(request)

    def search(self, query: SearchQuery) -> list[SearchHit]:
        with self._lock:
            return self.inner.search(query)

    def get(self, atom_id: str) -> Entry:
        with self._lock:
            return self.inner.get(atom_id)

    def delete(self, atom_id: str) -> int:
        with self._lock:
            return self.inner.delete(atom_id)

    def domains(self) -> list[str]:
        with self._lock:
            return self.inner.domains()

    def rooms(self) -> list[Room]:
        with self._lock:
            return self.inner.rooms()

    def create_room(self, name: str, description: str | None = None) -> Room:
        with self._lock:
            return self.inner.create_room(name, description)

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite:
        with self._lock:
            return self.inner.invite(room, scope=scope, expires_days=expires_days, max_uses=max_uses)

    def join(self, code: str) -> Joined:
        with self._lock:
            return self.inner.join(code)

    def vault_list(self) -> list[SecretInfo]:
        with self._lock:
            return self.inner.vault_list()

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str:
        with self._lock:
            return self.inner.vault_add(alias, context, sealed_b64)

    def close(self) -> None:
        with self._lock:
            self.inner.close()
