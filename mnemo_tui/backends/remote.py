"""Provides `RemoteBackend`: the `Backend` protocol over a REST endpoint that speaks docs/server.md (hosted or `mnemo serve`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator
from hashlib import sha256
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import quote

from mnemo_tui.backends import Backend
from mnemo_tui.backends.remote_calls import Calls
from mnemo_tui.backends.remote_http import DeadlinePassed, TooLarge, TransportError
from mnemo_tui.backends.remote_wire import CANONICAL_HEADER, entry_of, page_of, read_page, time_of, wire_time
from mnemo_tui.errors import AuthError, NotFound, Unavailable, ValidationError
from mnemo_tui.limits import ROOM_PREFIX
from mnemo_tui.state.config import Settings
from mnemo_tui.state.credentials import lookup_key
from mnemo_tui.values.model import Entry, Page, RecentQuery, by_author
from mnemo_tui.values.plane import Stats
from mnemo_tui.values.rooms import Invite, Joined, Room, room_id_of
from mnemo_tui.values.search import Detail, SearchHit, SearchQuery
from mnemo_tui.values.secrets import SecretInfo
from mnemo_tui.values.text_page import TextPage
from mnemo_tui.values.writes import WriteRequest, WriteResult

if TYPE_CHECKING:
    from mnemo_tui.backends import remote_consumers
    from mnemo_tui.backends.remote_follow import RemoteFollow
    from mnemo_tui.values.removals import Removals


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _client_filters(query: RecentQuery) -> str | None:
    """The binding of the author filters the client applies itself (None when the endpoint applies them all)."""
    if query.author is None and "/" not in (query.exclude_author or ""):
        return None
    spec = f"{query.author or ''}\x1f{query.exclude_author or ''}"
    return "a" + sha256(spec.encode()).hexdigest()[:10] + "-"


def _bind(binding: str, cursor: str) -> str:
    """The endpoint's cursor with the client's filters bound in front of it."""
    return binding + cursor


def _unbind(binding: str, cursor: str) -> str:
    """The endpoint's cursor out of one `_bind` made for these filters.

    Raises:
        ValidationError: a cursor issued for other filters (or for none).
    """
    if not cursor.startswith(binding) or len(cursor) == len(binding):
        raise ValidationError("cursor does not belong to this scope and these filters")
    return cursor[len(binding) :]


def _served(query: RecentQuery, local: str) -> RecentQuery:
    """What the endpoint is asked for a query whose author filters the client applies itself (`local`)."""
    return query.replace(
        author=None,
        exclude_author=None if "/" in (query.exclude_author or "") else query.exclude_author,
        cursor=None if query.cursor is None else _unbind(local, query.cursor),
    )


def _kept(query: RecentQuery, local: str, page: Page | TextPage) -> Page:
    """An endpoint's page with the client's author filters applied, its cursor bound to them."""
    kept = [
        e
        for e in page.items
        if (query.author is None or by_author(e, query.author))
        and (query.exclude_author is None or not by_author(e, query.exclude_author))
    ]
    return Page(items=kept, next_cursor=None if not page.next_cursor else _bind(local, page.next_cursor))


def _text(body: Any, name: str, default: str = "") -> str:
    value = body.get(name) if isinstance(body, dict) else None
    return value if isinstance(value, str) else default


class RemoteBackend(Calls, Backend):
    """A REST endpoint, read and written with one API key over one keep-alive HTTP client.

    Attributes:
        identity: the endpoint URL (watermarks are keyed by it).
        principal: `key:<12 hex of sha256(key)>`, so two keys on one endpoint never share a watermark.
    """

    kind = "remote"

    @classmethod
    def from_settings(cls, settings: Settings) -> RemoteBackend:
        """The backend the settings select; the key comes from MNEMO_API_KEY, then the keyring (and its file).

        Raises:
            AuthError: no key for the endpoint.
        """
        assert settings.endpoint is not None
        key, _source = lookup_key(settings)
        if not key:
            raise AuthError(
                f"no API key for {settings.endpoint}: set MNEMO_API_KEY, or run `mnemo login` to keep one in the OS keyring"
            )
        return cls(settings.endpoint, key)

    @property
    def principal(self) -> str:
        return self._principal

    # -- the feed -----------------------------------------------------------------------------

    def _recent_body(self, q: RecentQuery) -> dict[str, Any]:
        return {
            "domain": q.scope,
            "since": wire_time(q.since),
            "until": wire_time(q.until),
            "exclude_author": q.exclude_author,
            "limit": q.limit,
            "cursor": q.cursor,
            "include_history": q.include_history,
        }

    def recent(self, query: RecentQuery) -> Page:
        """One page of the feed; a `next_cursor` absent or `""` ends the walk.

        The hosted dialect filters authors by principal only (`exclude_author`): `--author`, and an
        excluded `principal/agent`, are applied here to each page (a page may then hold fewer
        entries than its limit, even none, and still carry a cursor), and the cursors handed out
        are bound to them (`_bind`), so a cursor is only ever continued with the filters it was issued for.
        """
        query = query.validated()
        local = _client_filters(query)
        if local is None:
            return self._page(query)
        return _kept(query, local, self._page(_served(query, local)))

    def _page(self, query: RecentQuery) -> Page:
        response = self._send("POST", "/memory/recent", self._recent_body(query))
        canonical = response.headers.get(CANONICAL_HEADER) == "canonical"
        return page_of(response.content, canonical)

    def walk_pages(self, query: RecentQuery) -> Generator[Page | TextPage, None, None]:
        """The walk from the query's cursor to its end, as pages (the same pages `recent` would give,
        in the endpoint's own size), from one streamed answer where the endpoint offers it."""
        query = query.validated()
        return self._streamed(query, _client_filters(query))

    def _streamed(self, query: RecentQuery, local: str | None) -> Generator[Page | TextPage, None, None]:
        """`POST /memory/recent` asked for NDJSON: each line a page, parsed as a page is (and held to its
        size bound), until the line whose `next_cursor` is null. A stream that breaks (a server killed, a
        dropped connection, no byte within the read timeout) is asked again from the last line's cursor
        with the retry policy's backoff, and given up like a request when that fails. An endpoint that
        answers one page of JSON (the hosted service) is walked on page by page, as `recent` does."""
        server = query if local is None else _served(query, local)
        cursor = server.cursor
        broken = 0
        while True:
            body = self._recent_body(server.replace(cursor=cursor))
            answer = self._send("POST", "/memory/recent", body, stream=True)
            canonical = answer.headers.get(CANONICAL_HEADER) == "canonical"
            if answer.stream is None:
                first = read_page(answer.content, canonical)
                yield first if local is None else _kept(query, local, first)
                cursor = first.next_cursor
                while cursor is not None:
                    page = self._page(server.replace(cursor=cursor))
                    yield page if local is None else _kept(query, local, page)
                    cursor = page.next_cursor
                return
            reason = "it ended before its last page"
            try:
                with answer.stream as stream:
                    for line in stream.lines(seconds=self.deadline):
                        if not line or line.isspace():
                            continue
                        read = read_page(line, canonical, line=True)
                        broken = 0
                        yield read if local is None else _kept(query, local, read)
                        if read.next_cursor is None:
                            return
                        cursor = read.next_cursor
            except DeadlinePassed:
                raise Unavailable(
                    f"no whole page from {self.identity}'s stream within the deadline of {self.deadline:g} s "
                    "(set MNEMO_DEADLINE to wait longer)"
                ) from None
            except TooLarge as exc:
                raise Unavailable(f"{self.identity} sent {exc.reason} in its stream; not asked again") from None
            except TransportError as exc:
                reason = exc.reason
            if not self._wait_to_retry(broken, time.monotonic() + self.deadline):
                raise Unavailable(
                    f"the walk's stream from {self.identity} broke {broken + 1} time(s) in a row without a page "
                    f"({reason}); is the server up?"
                )
            broken += 1

    # False once the endpoint answered that it has no push channel (404/405): asked once per backend.
    _offers_follow = True

    def follow(self, query: RecentQuery, position: str | None = None) -> RemoteFollow | None:
        """`POST /memory/follow` (mnemo serve's push channel, docs/server.md, "Push follow"); None where the endpoint has
        none (the hosted service), remembered for this backend, so its callers poll without a word."""
        if not self._offers_follow:
            return None
        from mnemo_tui.backends import remote_follow

        opened = remote_follow.follow(self, query, position)
        if opened is None:
            self._offers_follow = False
        return opened

    # -- writes and search --------------------------------------------------------------------

    def write(self, request: WriteRequest) -> WriteResult:
        body: dict[str, Any] = {
            "content": request.content,
            "domain": request.domain,
            "concepts": list(request.concepts),
        }
        if request.metadata is not None:
            body["metadata"] = request.metadata
        if request.external_ref is not None:
            body["external_ref"] = request.external_ref
        if request.supersedes:
            body["supersedes"] = list(request.supersedes)
        author = {"agent": request.agent, "agent_name": request.agent_name, "client_env": request.client_env}
        if any(author.values()):
            body["author"] = author
        answer = self._call("POST", "/memory/write", body, idempotent=request.external_ref is not None)
        atom = answer.get("atom_id") if isinstance(answer, dict) else None
        if not isinstance(atom, str) or not atom:
            reason = _text(answer, "reason", "no reason given")
            raise ValidationError(f"{self.identity} did not store the entry: {reason}")
        superseded = answer.get("superseded") or []
        reason = _text(answer, "reason")
        return WriteResult(
            atom_id=atom,
            superseded=tuple(str(s) for s in superseded),
            created=not reason.startswith("duplicate"),
        )

    def feedback(self, atom_ids: list[str], outcome: float) -> int | None:
        """`POST /memory/feedback`: the endpoint's `updated_count` (None when it reports none)."""
        answer = self._call("POST", "/memory/feedback", {"atom_ids": atom_ids, "outcome": outcome}, idempotent=False)
        count = answer.get("updated_count") if isinstance(answer, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def search(self, query: SearchQuery) -> list[SearchHit]:
        if not query.query or not query.query.strip():
            raise ValidationError("search needs a query; to list what happened lately, use `mnemo recent`")
        body = {
            "query": query.query,
            "domain": query.scope,
            "order_by": query.order_by,
            "since": wire_time(query.since),
            "until": wire_time(query.until),
            "exclude_author": query.exclude_author,
            "include_history": query.include_history,
            "top_k": query.top_k,
            # The hosted default (0.3) would hide weak matches the embedded search returns.
            "min_relevance": 0.0,
        }
        answer = self._call("POST", "/memory/read", body)
        items = answer.get("items") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            raise Unavailable(f"{self.identity} answered /memory/read without an items list")
        return [SearchHit(entry=entry_of(i), relevance=_number(i.get("relevance"))) for i in items]

    # -- single atoms -------------------------------------------------------------------------

    @staticmethod
    def _atom_id(atom_id: str) -> str | None:
        try:
            return str(uuid.UUID(atom_id))
        except ValueError:
            return None

    def get(self, atom_id: str) -> Entry:
        atom = self._atom_id(atom_id)
        if atom is None:
            raise NotFound(f"no entry {atom_id}")
        return entry_of(self._call("GET", f"/memory/atoms/{atom}"))

    def detail(self, atom_id: str) -> Detail:
        atom = self._atom_id(atom_id)
        if atom is None:
            raise NotFound(f"no entry {atom_id}")
        answer = self._call("GET", f"/memory/atoms/{atom}")
        entry = entry_of(answer)
        metadata = answer.get("metadata") if isinstance(answer, dict) else None
        ref = answer.get("external_ref") if isinstance(answer, dict) else None
        return Detail(entry, metadata if isinstance(metadata, dict) else {}, ref if isinstance(ref, str) else None)

    def chain(self, atom_id: str) -> list[Entry] | None:
        """`GET /memory/atoms/{id}/chain` where the server has it (None where it answers 404 or 405)."""
        atom = self._atom_id(atom_id)
        if atom is None:
            return None
        try:
            answer = self._call("GET", f"/memory/atoms/{atom}/chain")
        except (NotFound, ValidationError):
            return None
        items = answer
        if isinstance(answer, dict):
            items = next((answer[k] for k in ("chain", "items", "revisions") if isinstance(answer.get(k), list)), None)
        if not isinstance(items, list):
            return None
        entries = [entry_of(item) for item in items]
        return sorted(entries, key=lambda e: (e.created_at, e.atom_id))

    def consumers(self) -> remote_consumers.Consumers:
        """The calls of durable consumers (`/mnemo/consumers`, mnemo serve's extension; docs/consumers.md)."""
        from mnemo_tui.backends import remote_consumers  # with the state database it loads: not for a walk

        return remote_consumers.Consumers(self._call, self.identity)

    def removals(self, scope: str | None, after: int | None, upto: int | None = None) -> Removals | None:
        from mnemo_tui.backends import remote_removals  # not for a walk

        return remote_removals.removals(self._call, self.identity, scope, after, upto)

    def delete(self, atom_id: str) -> int:
        atom = self._atom_id(atom_id)
        if atom is None:
            return 0
        answer = self._call("DELETE", f"/memory/atoms/{atom}")
        deleted = answer.get("deleted", 0) if isinstance(answer, dict) else 0
        return int(deleted) if isinstance(deleted, (int, bool)) else 0

    def whoami(self) -> tuple[str, str | None] | None:
        """`GET /mnemo/whoami` (mnemo serve's extension): the key's principal and key id; None where the endpoint
        has no such route (404). Asked once, never retried, as `stats`: `mnemo status` reports, it does not wait.

        Raises:
            MnemoError: any other refusal or failure.
        """
        retries, self.retries = self.retries, 0
        try:
            answer = self._call("GET", "/mnemo/whoami")
        except NotFound:
            return None
        finally:
            self.retries = retries
        name = answer.get("principal") if isinstance(answer, dict) else None
        if not isinstance(name, str) or not name:
            raise Unavailable(f"{self.identity} answered /mnemo/whoami with a body that names no principal")
        key_id = answer.get("key_id")
        return name, key_id if isinstance(key_id, str) and key_id else None

    def stats(self) -> Stats:
        """`GET /memory/stats`: the endpoint's counts of the key's store (missing fields read as zero).

        Asked once, never retried: `mnemo status` reports, it does not wait for an endpoint to come back.
        """
        retries, self.retries = self.retries, 0
        try:
            answer = self._call("GET", "/memory/stats")
        finally:
            self.retries = retries
        if not isinstance(answer, dict):
            raise Unavailable(f"{self.identity} answered /memory/stats with a body that is not an object")

        def number(name: str) -> float:
            value = answer.get(name)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

        domains = answer.get("domains")
        return Stats(
            total_atoms=int(number("total_atoms")),
            domains=sorted(d for d in domains if isinstance(d, str)) if isinstance(domains, list) else [],
            concept_edges=int(number("hebbian_edges")),
            avg_valence=number("avg_valence"),
            feedback=int(number("feedback_atoms")),
            fingerprints=int(number("episodic_fingerprints")),
        )

    def domains(self) -> list[str]:
        answer = self._call("GET", "/memory/domains")
        values = answer.get("domains") if isinstance(answer, dict) else answer
        found = []
        for value in values if isinstance(values, list) else []:
            name = value if isinstance(value, str) else _text(value, "domain") or _text(value, "name")
            if name:
                found.append(name)
        return sorted(found)

    # -- rooms --------------------------------------------------------------------------------

    def rooms(self) -> list[Room]:
        answer = self._call("GET", "/memory/rooms")
        listed = answer if isinstance(answer, list) else (answer.get("rooms") if isinstance(answer, dict) else None)
        rooms = []
        for r in listed if isinstance(listed, list) else []:
            if not isinstance(r, dict) or not isinstance(r.get("room_id"), str):
                continue
            rooms.append(
                Room(
                    room_id=r["room_id"],
                    name=_text(r, "name"),
                    role=cast(Literal["owner", "member"], _text(r, "role", "member")),
                    scope=cast(Literal["read", "read_write"], _text(r, "scope", "read")),
                    archived=bool(r.get("archived", False)),
                )
            )
        return rooms

    def create_room(self, name: str, description: str | None = None) -> Room:
        body: dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        answer = self._call("POST", "/memory/rooms", body, idempotent=False)
        return Room(
            room_id=_text(answer, "room_id"), name=_text(answer, "name", name), role="owner", scope="read_write"
        )

    def delete_room(self, room: str) -> tuple[str, int]:
        """`DELETE /memory/rooms/{id}`: mnemo serve's extension; an endpoint without it answers 404 or 405."""
        room_id = room_id_of(room, self.rooms)
        answer = self._call("DELETE", f"/memory/rooms/{room_id}", idempotent=False)
        deleted = answer.get("deleted", 0) if isinstance(answer, dict) else 0
        return room_id, int(deleted) if isinstance(deleted, int) else 0

    def invite(self, room: str, *, scope: str = "read_write", expires_days: int = 7, max_uses: int = 1) -> Invite:
        room_id = room_id_of(room, self.rooms)
        body = {"scope": scope, "expires_in_days": expires_days, "max_uses": max_uses}
        answer = self._call("POST", f"/memory/rooms/{room_id}/invites", body, idempotent=False)
        address = _text(answer, "room_address", ROOM_PREFIX + room_id)
        expires = answer.get("expires_at") if isinstance(answer, dict) else None
        return Invite(
            code=_text(answer, "code"),
            room_id=address[len(ROOM_PREFIX) :] if address.startswith(ROOM_PREFIX) else room_id,
            invite_id=_text(answer, "invite_id"),
            scope=_text(answer, "scope", scope),
            expires_at=time_of(expires) or 0,
            max_uses=max_uses,
        )

    def join(self, code: str) -> Joined:
        answer = self._call("POST", "/memory/rooms/join", {"code": code})
        return Joined(
            room_id=_text(answer, "room_id"),
            name=_text(answer, "name"),
            scope=_text(answer, "scope"),
            already_member=bool(answer.get("already_member", False)) if isinstance(answer, dict) else False,
        )

    # -- vault --------------------------------------------------------------------------------

    def vault_list(self) -> list[SecretInfo]:
        answer = self._call("GET", "/vault/secrets")
        listed = answer.get("secrets") if isinstance(answer, dict) else None
        return [
            SecretInfo(
                alias=_text(s, "alias"),
                context=_text(s, "context"),
                created_at=time_of(s.get("created_at")) or 0,
                concepts=tuple(str(c) for c in s.get("concepts") or []),
            )
            for s in (listed if isinstance(listed, list) else [])
            if isinstance(s, dict)
        ]

    def vault_add(self, alias: str, context: str, sealed_b64: str) -> str:
        body = {"alias": alias, "context": context, "sealed_secret_b64": sealed_b64}
        answer = self._call("POST", "/vault/secrets", body, idempotent=False)
        return _text(answer, "atom_id")

    def vault_sealed(self, alias: str) -> str:
        answer = self._call("GET", "/vault/secrets/by-alias/" + quote(alias, safe=""))
        sealed = answer.get("sealed_secret_b64") if isinstance(answer, dict) else None
        if not isinstance(sealed, str):
            raise Unavailable(f"{self.identity} answered /vault/secrets/by-alias without a sealed_secret_b64")
        return sealed
