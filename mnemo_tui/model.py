"""Provides mnemo's values: entries, pages, queries, rooms, watermarks and empty reports."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from mnemo_tui import timefmt
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.text import block

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
MAX_CONTENT = 10_000
MAX_DOMAIN = 100
MAX_METADATA_BYTES = 65_536
MAX_CONCEPTS = 256
MAX_SUPERSEDES = 32
MAX_EXTERNAL_REF = 255
MAX_CURSOR = 512
MAX_SECRET_CONTEXT = 10_000  # the hosted service's CreateSecretRequest.context maxLength
ROOM_PREFIX = "xroom:"
ROOM_ID = re.compile(r"^room_[0-9A-HJKMNP-TV-Z]{26}$")
CURSOR_SHAPE = re.compile(r"^[A-Za-z0-9_=-]{1,512}$")
ALIAS_SHAPE = re.compile(r"^[A-Za-z0-9._-]+$")

EmptyKind = Literal["empty_scope", "nothing_new", "no_match", "past_cursor"]


def dumps(value: Any) -> str:
    """Compact JSON with UTF-8 kept as is: the one spelling of everything mnemo stores, sends and prints."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def check_limit(limit: int) -> int:
    """Validate a page size (1–100)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    return limit


def parse_scope(scope: str | None) -> str | None:
    """Validate a scope: None (own store), `xroom:<room_id>`, or one own domain (≤ 100 chars).

    Raises:
        ValidationError: an `xroom:` with an empty or malformed id, or a domain too long or blank.
    """
    if scope is None:
        return None
    if scope.startswith(ROOM_PREFIX):
        room_id = scope[len(ROOM_PREFIX) :]
        if not ROOM_ID.match(room_id):
            raise ValidationError(f"scope {scope!r}: a room address is xroom:room_<26-char ULID>")
        return scope
    if scope[: len(ROOM_PREFIX)].lower() == ROOM_PREFIX:
        raise ValidationError(f"scope {scope!r}: a room address is spelled in lower case, xroom:room_<26-char ULID>")
    if not scope.strip():
        raise ValidationError("scope must not be blank (omit it for your own store)")
    if len(scope) > MAX_DOMAIN:
        raise ValidationError(f"domain is at most {MAX_DOMAIN} characters, got {len(scope)}")
    return scope


def check_consumer(name: str) -> str:
    """A consumer's name as every front end takes it: 1 to 200 characters, not blank.

    Raises:
        ValidationError: a blank or over-long name.
    """
    if not name.strip() or len(name) > 200:
        raise ValidationError("--consumer must be 1 to 200 characters")
    return name


def by_author(entry: Entry, spec: str) -> bool:
    """Whether an entry is by the author `spec`: its principal, or the AUTHOR column's `principal/agent`.

    The engine's SQL (`engine/feed.py`) says the same; a client applies this where its endpoint cannot.
    """
    return entry.provenance.get("principal") == spec or entry.author == spec


def room_of(scope: str | None) -> str | None:
    """The room id of an `xroom:` scope, else None."""
    if scope is not None and scope.startswith(ROOM_PREFIX):
        return scope[len(ROOM_PREFIX) :]
    return None


def describe_scope(scope: str | None, quote: Callable[[str], str] = repr) -> str:
    """A human name for a scope (`quote=text.quoted` for one a terminal shows: a domain is stored text)."""
    if scope is None:
        return "your own store (all your domains, no rooms)"
    if scope.startswith(ROOM_PREFIX):
        return f"room {scope}"
    return f"domain {quote(scope)} of your own store"


@dataclass(frozen=True)
class Entry:
    """One entry of the feed, kept as its wire JSON (`RecentItem`) plus the fields a walk needs.

    The wire text is what JSON outputs write as they are; the other fields are parsed lazily.
    """

    atom_id: str
    created_at: int
    wire: str

    @cached_property
    def data(self) -> dict[str, Any]:
        """The parsed wire item."""
        parsed: dict[str, Any] = json.loads(self.wire)
        return parsed

    @property
    def content(self) -> str:
        return str(self.data.get("content", ""))

    @property
    def domain(self) -> str:
        return str(self.data.get("domain", ""))

    @property
    def concepts(self) -> list[str]:
        return list(self.data.get("concepts") or [])

    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.data.get("provenance") or {})

    @property
    def author(self) -> str:
        """`principal` (and `/agent` when there is one), for display."""
        prov = self.provenance
        who = str(prov.get("principal") or "?")
        agent = prov.get("agent_name") or prov.get("agent")
        return f"{who}/{agent}" if agent else who

    @property
    def supersedes(self) -> list[str]:
        return list(self.data.get("supersedes") or [])

    @property
    def superseded_by(self) -> str | None:
        value = self.data.get("superseded_by")
        return str(value) if value else None

    @property
    def first_line(self) -> str:
        for line in self.content.splitlines():
            if line.strip():
                return line.strip()
        return ""


@dataclass(frozen=True)
class Detail:
    """One entry whole (`mnemo show`): its wire item plus what the feed does not carry."""

    entry: Entry
    metadata: dict[str, Any] = field(default_factory=dict)
    external_ref: str | None = None


@dataclass(frozen=True)
class Page:
    """One page of the feed: the entries, newest first, and the cursor for the next one (None at the end)."""

    items: list[Entry]
    next_cursor: str | None


@dataclass(frozen=True)
class WirePage:
    """A feed page as the entries' wire texts (what the server sends), and the next cursor."""

    items: list[str]
    next_cursor: str | None


@dataclass(frozen=True)
class RecentQuery:
    """The arguments of one feed read (WIRE.md `POST /memory/recent`)."""

    scope: str | None = None
    since: int | None = None
    until: int | None = None
    exclude_author: str | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    include_history: bool = False
    author: str | None = None

    def validated(self) -> RecentQuery:
        """Check every field; raises ValidationError naming the first bad one."""
        parse_scope(self.scope)
        check_limit(self.limit)
        if self.since is not None and self.until is not None and self.until < self.since:
            raise ValidationError("until is before since")
        if self.cursor is not None and not CURSOR_SHAPE.match(self.cursor):
            raise ValidationError("malformed cursor")
        return self


@dataclass(frozen=True)
class WriteRequest:
    """The arguments of one write (WIRE.md `POST /memory/write`)."""

    content: str
    domain: str = "general"
    concepts: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    external_ref: str | None = None
    supersedes: tuple[str, ...] = ()
    agent: str | None = None
    agent_name: str | None = None
    client_env: str | None = "cli"
    fingerprint: str | None = None


@dataclass(frozen=True)
class WriteResult:
    """What a write returned: the atom's id, and the ids it superseded."""

    atom_id: str
    superseded: tuple[str, ...] = ()
    created: bool = True


@dataclass(frozen=True)
class SearchQuery:
    """The arguments of one search (WIRE.md `POST /memory/read`)."""

    query: str
    scope: str | None = None
    order_by: Literal["relevance", "recency"] = "relevance"
    since: int | None = None
    until: int | None = None
    exclude_author: str | None = None
    include_history: bool = False
    top_k: int = 10
    author: str | None = None


@dataclass(frozen=True)
class SearchHit:
    """One search result: the entry and its relevance in [0, 1]."""

    entry: Entry
    relevance: float


@dataclass(frozen=True)
class Room:
    """A room the reader belongs to (wire `RoomListItem`)."""

    room_id: str
    name: str
    role: Literal["owner", "member"]
    scope: Literal["read", "read_write"]
    archived: bool = False

    @property
    def address(self) -> str:
        return ROOM_PREFIX + self.room_id

    def wire(self) -> dict[str, Any]:
        return {
            "room_id": self.room_id,
            "name": self.name,
            "address": self.address,
            "role": self.role,
            "scope": self.scope,
            "archived": self.archived,
        }

    def created(self, next_steps: str) -> dict[str, Any]:
        """The wire `RoomCreated` of a room just created."""
        return {"room_id": self.room_id, "address": self.address, "name": self.name, "next_steps": next_steps}


def room_id_of(ref: str, rooms: Callable[[], list[Room]]) -> str:
    """A room id from an address, an id, or the name of one of the reader's `rooms` (listed only then).

    Raises:
        Forbidden: no room of that name among them (an unknown room reads like a foreign one).
        ValidationError: several of them bear that name.
    """
    room_id = ref[len(ROOM_PREFIX) :] if ref.startswith(ROOM_PREFIX) else ref
    if ROOM_ID.match(room_id):
        return room_id
    matches = [r for r in rooms() if r.name == ref]
    if len(matches) == 1:
        return matches[0].room_id
    if len(matches) > 1:
        raise ValidationError(f"several of your rooms are named {ref!r}; use the xroom: address")
    raise Forbidden(f"you are not a member of a room {ref!r} (or it does not exist)")


@dataclass(frozen=True)
class Invite:
    """A created invite (wire `InviteCreated`); the code is shown once."""

    code: str
    room_id: str
    invite_id: str
    scope: str
    expires_at: int
    max_uses: int

    @property
    def room_address(self) -> str:
        return ROOM_PREFIX + self.room_id

    def wire(self) -> dict[str, Any]:
        """The wire `InviteCreated` (there is no landing page of our own: `join_url` is empty)."""
        return {
            "invite_id": self.invite_id,
            "code": self.code,
            "room_address": self.room_address,
            "scope": self.scope,
            "expires_at": timefmt.to_iso(self.expires_at),
            "join_url": "",
            "share_message": (
                f"You are invited to the room {self.room_address}. Invite code: {self.code}. Join it with "
                f"`mnemo rooms join {self.code}`, or from an MCP client with the memory_join_room tool "
                f'(code "{self.code}").'
            ),
        }


@dataclass(frozen=True)
class InviteInfo:
    """An invite as its room's owner lists it (wire `InviteInfoSchema`): audit fields, never the code."""

    invite_id: str
    scope: str
    max_uses: int
    uses: int
    expires_at: int
    created_at: int

    def wire(self) -> dict[str, Any]:
        return {
            "invite_id": self.invite_id,
            "scope": self.scope,
            "max_uses": self.max_uses,
            "uses": self.uses,
            "expires_at": timefmt.to_iso(self.expires_at),
            "revoked_at": None,
            "created_at": timefmt.to_iso(self.created_at),
        }


@dataclass(frozen=True)
class Stats:
    """What `GET /memory/stats` counts in the caller's own store."""

    total_atoms: int
    domains: list[str]
    concept_edges: int
    avg_valence: float
    feedback: int
    fingerprints: int = 0


@dataclass(frozen=True)
class Revision:
    """One revision of a supersession chain."""

    entry: Entry
    is_head: bool


@dataclass(frozen=True)
class Chain:
    """Every revision reachable from one atom by supersession links, oldest first."""

    atom_id: str
    revisions: list[Revision]
    dangling: list[str]
    truncated: bool


@dataclass(frozen=True)
class GraphEdge:
    """Two concepts joined by the atoms that carry both."""

    source: str
    target: str
    weight: float
    valence: float
    count: int
    updated_at: int


@dataclass(frozen=True)
class Graph:
    edges: list[GraphEdge]
    truncated: bool
    min_weight_applied: float


@dataclass(frozen=True)
class DomainWipe:
    """What `DELETE /memory/domain/{d}` did."""

    deleted: int
    skipped_secrets: int
    left_hidden: int


@dataclass(frozen=True)
class Joined:
    """The answer to joining a room (wire `JoinedRoom`)."""

    room_id: str
    name: str
    scope: str
    already_member: bool

    @property
    def address(self) -> str:
        return ROOM_PREFIX + self.room_id

    def wire(self, next_steps: str) -> dict[str, Any]:
        """The wire `JoinedRoom`."""
        return {
            "room_id": self.room_id,
            "address": self.address,
            "name": self.name,
            "scope": self.scope,
            "already_member": self.already_member,
            "next_steps": next_steps,
        }


@dataclass(frozen=True)
class SecretInfo:
    """A vault entry as listings show it: never the value."""

    alias: str
    context: str
    created_at: int
    concepts: tuple[str, ...] = ()

    def wire(self) -> dict[str, Any]:
        """The wire `SecretListItem`: alias, context, time and concepts (there is no value to show)."""
        return {
            "alias": self.alias,
            "context": self.context,
            "created_at": timefmt.to_iso(self.created_at),
            "concepts": list(self.concepts),
        }


@dataclass(frozen=True)
class KeyInfo:
    """An API key as listings show it: never the key."""

    key_id: str
    principal: str
    created_at: int
    revoked: bool

    def wire(self) -> dict[str, Any]:
        """CLI.md's `keys list` item."""
        return {
            "key_id": self.key_id,
            "principal": self.principal,
            "created_at": timefmt.to_iso(self.created_at),
            "revoked": self.revoked,
        }


@dataclass(frozen=True)
class Watermark:
    """The newest instant a finished walk saw, and the ids delivered at/near it (the boundary ids)."""

    scope: str | None
    consumer: str
    created_at: int | None
    boundary_ids: tuple[str, ...]
    updated_at: int


@dataclass(frozen=True)
class WalkProgress:
    """How far a walk of the feed has come: what a checkpoint saves and a resumed walk continues from.

    Attributes:
        cursor: the cursor of the next page (None before the first page, and at the end).
        done: the walk has read a page without a cursor.
        newest: the newest instant seen; `newest_ids` the ids seen within the overlap below it.
        pages: requests made; `delivered` fresh entries yielded; `repeats` held entries dropped.
    """

    cursor: str | None = None
    done: bool = False
    newest: int | None = None
    newest_ids: tuple[str, ...] = ()
    pages: int = 0
    delivered: int = 0
    repeats: int = 0


@dataclass(frozen=True)
class RoomRef:
    """A room named in an empty report."""

    name: str
    address: str


@dataclass(frozen=True)
class EmptyReport:
    """What an empty answer covered (CLI.md `empty_report`).

    `text` is the wire's, with stored names exact (JSON is for machines); `shown` is the same
    report for a person's terminal, every stored name in it passed through `mnemo_tui.text`
    (a room name's newline as `⏎`, so it cannot forge a line of the report).
    """

    kind: EmptyKind
    scope: str | None
    text: str
    unsearched_rooms: tuple[RoomRef, ...] = field(default=())
    shown: str = ""

    def __post_init__(self) -> None:
        if not self.shown:
            object.__setattr__(self, "shown", block(self.text))

    def wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "scope": self.scope,
            "text": self.text,
            "unsearched_rooms": [{"name": r.name, "address": r.address} for r in self.unsearched_rooms],
        }
