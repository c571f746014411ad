"""Provides the `Backend` protocol every front end talks to, whatever is behind it (embedded store or endpoint)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Protocol

from mnemo_tui.values.model import Entry, Page, RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.values.follow import Follow
    from mnemo_tui.values.plane import Stats
    from mnemo_tui.values.removals import Removals
    from mnemo_tui.values.rooms import Invite, Joined, Room
    from mnemo_tui.values.search import Detail, SearchHit, SearchQuery
    from mnemo_tui.values.secrets import SecretInfo
    from mnemo_tui.values.text_page import TextPage
    from mnemo_tui.values.writes import WriteRequest, WriteResult


class Backend(Protocol):
    """The operations of mnemo over one store, on behalf of one principal.

    Implementations subclass it, so the optional abilities below keep their defaults where a
    backend has nothing better (an endpoint has no cheap change probe and no snapshot stream).

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
        """One page of the feed (docs/server.md `POST /memory/recent`)."""
        ...

    def write(self, request: WriteRequest) -> WriteResult: ...

    def search(self, query: SearchQuery) -> list[SearchHit]: ...

    def get(self, atom_id: str) -> Entry: ...

    def delete(self, atom_id: str) -> int: ...

    def domains(self) -> list[str]: ...

    def stats(self) -> Stats: ...

    def rooms(self) -> list[Room]: ...

    def create_room(self, name: str, description: str | None = None) -> Room: ...

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite: ...

    def join(self, code: str) -> Joined: ...

    def delete_room(self, room: str) -> tuple[str, int]:
        """Delete a room one owns (an address, id or name); returns its id and how many entries went."""
        ...

    def vault_list(self) -> list[SecretInfo]: ...

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str: ...

    def vault_sealed(self, alias: str) -> str:
        """The sealed value stored under `alias` (docs/server.md `GET /vault/secrets/by-alias/{alias}`); unsealing is the client's."""
        ...

    def close(self) -> None: ...

    # -- optional abilities, with the default of a backend that has none -------------------

    def feedback(self, atom_ids: list[str], outcome: float) -> int | None:
        """Record `outcome` (-1..1) for each of one's own entries named (docs/server.md `POST /memory/feedback`): how
        many were updated; None when the backend records no feedback."""
        return None

    def snapshot_wire(self, query: RecentQuery) -> Iterator[list[str]] | None:
        """Every remaining entry of a walk from one snapshot, as wire texts in chunks; None when the
        backend cannot read one (the catch-up layer's walk then follows the cursors)."""
        return None

    def walk_pages(self, query: RecentQuery) -> Generator[Page | TextPage, None, None] | None:
        """The walk from the query's cursor to the end of the feed, as the pages `recent` would give one
        by one (in the backend's own page size; a `TextPage` where they came as their items' texts), from one
        streamed read; None when the backend has none (`Walk` then asks `recent` page by page)."""
        return None

    def change_token(self) -> tuple[int, int] | None:
        """A cheap token that changes whenever the store may have changed; None when there is no such probe
        (watchers then poll)."""
        return None

    def follow(self, query: RecentQuery, position: str | None = None) -> Follow | None:
        """The feed of one scope pushed as it changes (docs/server.md, "Push follow"), from `position` (one the follow
        handed out) or else from `query`'s `since` or newest page; None when the backend offers no push
        (the embedded store, an endpoint without the channel): the caller then polls."""
        return None

    def removals(self, scope: str | None, after: int | None, upto: int | None = None) -> Removals | None:
        """The removals of a scope in `(after, upto]`, oldest first (`catchup --changes`); None when the
        backend keeps no tombstones (the hosted service).

        Raises:
            Forbidden: a room one is not (and was not) a member of.
        """
        return None

    def by_prefix(self, prefix: str) -> list[Entry] | None:
        """The readable entries (at most 6) whose id starts with `prefix`; None when the backend has no
        such lookup (an endpoint: the CLI then walks the feed)."""
        return None

    def detail(self, atom_id: str) -> Detail:
        """One entry whole: the wire item, its metadata and external reference (where the backend has them)."""
        from mnemo_tui.values.search import Detail

        return Detail(self.get(atom_id))

    def chain(self, atom_id: str) -> list[Entry] | None:
        """Every revision of the entry's supersession chain, oldest first, as the backend knows it; None
        when it has no such read (the CLI then follows `supersedes` / `superseded_by`)."""
        return None
