"""Provides the `Backend` protocol every front end talks to, whatever is behind it (embedded store or endpoint)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

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


class Backend(Protocol):
    """The operations of mnemo over one store, on behalf of one principal.

    Attributes:
        kind: `embedded` or `remote`.
        identity: what watermarks are keyed by: the resolved store path or the endpoint URL.
        principal: who reads and writes (on an endpoint: the key's principal, once known).
    """

    kind: str
    identity: str

    @property
    def principal(self) -> str: ...

    def recent(self, query: RecentQuery) -> Page:
        """One page of the feed (WIRE.md `POST /memory/recent`)."""
        ...

    def stream_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        """Every remaining entry of a walk as wire JSON strings, in chunks, newest first."""
        ...

    def write(self, request: WriteRequest) -> WriteResult: ...

    def search(self, query: SearchQuery) -> list[SearchHit]: ...

    def get(self, atom_id: str) -> Entry: ...

    def delete(self, atom_id: str) -> int: ...

    def domains(self) -> list[str]: ...

    def rooms(self) -> list[Room]: ...

    def create_room(self, name: str, description: str | None = None) -> Room: ...

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite: ...

    def join(self, code: str) -> Joined: ...

    def vault_list(self) -> list[SecretInfo]: ...

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str: ...

    def close(self) -> None: ...


def walk_pages(backend: Backend, query: RecentQuery) -> Iterator[Page]:
    """Follow cursors from `query` to the end of the feed, one page at a time."""
    current = query
    while True:
        page = backend.recent(current)
        yield page
        if page.next_cursor is None:
            return
        current = RecentQuery(
            scope=query.scope,
            since=query.since,
            until=query.until,
            exclude_author=query.exclude_author,
            limit=query.limit,
            cursor=page.next_cursor,
            include_history=query.include_history,
        )
