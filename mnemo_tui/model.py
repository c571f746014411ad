"""Provides mnemo's values: entries, pages, queries, rooms, watermarks and empty reports."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, NamedTuple

from mnemo_tui import timefmt
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.text import block

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Literal, Self

    EmptyKind = Literal["empty_scope", "nothing_new", "no_match", "past_cursor"]
else:
    EmptyKind = str  # the Literal above, for the type checker only

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
MAX_CONTENT = 10_000
MAX_DOMAIN = 100
MAX_METADATA_BYTES = 65_536
MAX_CONCEPTS = 256
MAX_SUPERSEDES = 32
MAX_EXTERNAL_REF = 255
MAX_SECRET_CONTEXT = 10_000  # the hosted service's CreateSecretRequest.context maxLength
ROOM_PREFIX = "xroom:"
ROOM_ID = re.compile(r"^room_[0-9A-HJKMNP-TV-Z]{26}\Z")
# Who may delete a room entry: our extension beyond the hosted rules (docs/server.md), held by the
# engine's delete statement (engine/atoms.py `DELETABLE`) and said first by the front ends (verbs.py).
ROOM_DELETE_RULE = "only its author (a read_write member) or the room's owner can delete a room entry"
# What a cursor may be spelled with (the URL-safe base64 alphabet and its padding), at most 512 characters.
# Checked on the ASCII bytes, letters and digits first, then by deleting the alphabet (all of it is the
# alphabet when nothing is left): a page pays it, and `str.strip` searched the 65 characters for each of
# the cursor's (~8,000 instructions against ~2,000), a pattern about half as many.
CURSOR_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=-"
CURSOR_MAX = 512


def cursor_shaped(cursor: str) -> bool:
    """Whether a cursor has a cursor's shape: 1 to 512 characters of the URL-safe base64 alphabet."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= CURSOR_MAX or not cursor.isascii():
        return False
    spelled = cursor.encode()
    # Letters and digits only (the issued cursors, hex) is the quick answer.
    return spelled.isalnum() or not spelled.translate(None, CURSOR_ALPHABET)


ALIAS_SHAPE = re.compile(r"^[A-Za-z0-9._-]+\Z")  # \Z: `$` also matches before a final newline


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON with UTF-8 kept as is: the one spelling of everything mnemo stores, sends and prints
    (`json.dumps` with these options, through one encoder instead of a new one per call)."""
    return _ENCODER.encode(value)


class Value:
    """The base of mnemo's values: fields are the annotated `__slots__`, set once by `__init__` and never after.

    Not dataclasses: building ~30 frozen dataclasses (and importing `dataclasses`, which imports
    `inspect`) was most of a cold start of `mnemo recent`, and a frozen dataclass pays
    `object.__setattr__` per field per value, which the feed pays per entry. A value compares,
    hashes and shows itself by its fields as a frozen dataclass did, and `replace` makes a changed
    copy (`dataclasses.replace`). Immutable by convention: nothing assigns a field after
    `__init__` (attributes whose name starts with `_` are caches, outside equality).
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            # Not inspect.get_annotations: importing inspect is what this class saves a cold start.
            names += [n for n in klass.__dict__.get("__annotations__", {}) if not n.startswith("_")]  # noqa: RUF063
        cls._fields = tuple(names)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Value)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` to some fields (what `dataclasses.replace` did)."""
        fields = {name: getattr(self, name) for name in self._fields}
        fields.update(changes)
        return type(self)(**fields)


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
    if not isinstance(scope, str):
        raise ValidationError(f"scope must be text, got {scope!r}")
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


class _EntryFields(NamedTuple):
    created_at: int  # microseconds since the epoch, UTC, assigned by the store
    atom_id: str
    wire: str  # the wire item as stored and sent (`RecentItem`), compact JSON


class Entry(_EntryFields):
    """One entry of the feed: the named tuple `(created_at, atom_id, wire)` and the fields of its wire item.

    The engines' feed statements select these three columns first, so a row is `Entry._make(row)`;
    elsewhere `Entry.of(atom_id, created_at, wire)`. It compares and hashes as its three fields do (and
    equals the plain tuple of them). The wire text is what JSON outputs write as it is; the other fields
    are read from the wire item, parsed on first use and kept in the instance's `__dict__` (no
    `__slots__` here for that reason), outside equality.
    """

    _data: dict[str, Any]

    @classmethod
    def of(cls, atom_id: str, created_at: int, wire: str) -> Entry:
        """An entry from its fields by name."""
        return cls(created_at, atom_id, wire)

    def __repr__(self) -> str:
        return f"Entry(atom_id={self.atom_id!r}, created_at={self.created_at!r}, wire={self.wire!r})"

    @property
    def data(self) -> dict[str, Any]:
        """The parsed wire item (parsed once, on first use)."""
        try:
            return self._data
        except AttributeError:
            parsed: dict[str, Any] = json.loads(self.wire)
            self._data = parsed
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


class Detail(Value):
    """One entry whole (`mnemo show`): its wire item plus what the feed does not carry."""

    __slots__ = ("entry", "external_ref", "metadata")
    entry: Entry
    metadata: dict[str, Any]
    external_ref: str | None

    def __init__(self, entry: Entry, metadata: dict[str, Any] | None = None, external_ref: str | None = None) -> None:
        self.entry = entry
        self.metadata = {} if metadata is None else metadata
        self.external_ref = external_ref


class Page(Value):
    """One page of the feed: the entries, newest first, and the cursor for the next one (None at the end)."""

    __slots__ = ("items", "next_cursor")
    items: list[Entry]
    next_cursor: str | None

    def __init__(self, items: list[Entry], next_cursor: str | None) -> None:
        self.items = items
        self.next_cursor = next_cursor


class WirePage(Value):
    """A feed page as the entries' wire texts (what the server sends), and the next cursor."""

    __slots__ = ("items", "next_cursor")
    items: list[str]
    next_cursor: str | None

    def __init__(self, items: list[str], next_cursor: str | None) -> None:
        self.items = items
        self.next_cursor = next_cursor


class RecentQuery(Value):
    """The arguments of one feed read (WIRE.md `POST /memory/recent`)."""

    __slots__ = ("author", "cursor", "exclude_author", "include_history", "limit", "scope", "since", "until")
    scope: str | None
    since: int | None
    until: int | None
    exclude_author: str | None
    limit: int
    cursor: str | None
    include_history: bool
    author: str | None

    def __init__(
        self,
        scope: str | None = None,
        since: int | None = None,
        until: int | None = None,
        exclude_author: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
        include_history: bool = False,
        author: str | None = None,
    ) -> None:
        self.scope = scope
        self.since = since
        self.until = until
        self.exclude_author = exclude_author
        self.limit = limit
        self.cursor = cursor
        self.include_history = include_history
        self.author = author

    def filters(self) -> tuple[str | None, int | None, int | None, str | None, bool, str | None]:
        """What a walk is bound to, page after page: scope, times, authors, history (not the cursor or
        the limit). A cursor is signed for these (`engine.cursor.binding`), a statement built for them."""
        return self.scope, self.since, self.until, self.exclude_author, self.include_history, self.author

    def validated(self) -> RecentQuery:
        """Check every field; raises ValidationError naming the first bad one."""
        parse_scope(self.scope)
        check_limit(self.limit)
        for name, when in (("since", self.since), ("until", self.until)):
            if when is not None and (isinstance(when, bool) or not isinstance(when, int)):
                raise ValidationError(f"{name} must be a time in microseconds, got {when!r}")
        for name, who in (("author", self.author), ("exclude_author", self.exclude_author)):
            if who is not None and not isinstance(who, str):
                raise ValidationError(f"{name} must be text, got {who!r}")
        if self.since is not None and self.until is not None and self.until < self.since:
            raise ValidationError("until is before since")
        if self.cursor is not None and not cursor_shaped(self.cursor):
            raise ValidationError("malformed cursor")
        return self


class WriteRequest(Value):
    """The arguments of one write (WIRE.md `POST /memory/write`)."""

    __slots__ = (
        "agent",
        "agent_name",
        "client_env",
        "concepts",
        "content",
        "domain",
        "external_ref",
        "fingerprint",
        "metadata",
        "supersedes",
    )
    content: str
    domain: str
    concepts: tuple[str, ...]
    metadata: dict[str, Any] | None
    external_ref: str | None
    supersedes: tuple[str, ...]
    agent: str | None
    agent_name: str | None
    client_env: str | None
    fingerprint: str | None

    def __init__(
        self,
        content: str,
        domain: str = "general",
        concepts: tuple[str, ...] = (),
        metadata: dict[str, Any] | None = None,
        external_ref: str | None = None,
        supersedes: tuple[str, ...] = (),
        agent: str | None = None,
        agent_name: str | None = None,
        client_env: str | None = "cli",
        fingerprint: str | None = None,
    ) -> None:
        self.content = content
        self.domain = domain
        self.concepts = concepts
        self.metadata = metadata
        self.external_ref = external_ref
        self.supersedes = supersedes
        self.agent = agent
        self.agent_name = agent_name
        self.client_env = client_env
        self.fingerprint = fingerprint


class WriteResult(Value):
    """What a write returned: the atom's id, and the ids it superseded."""

    __slots__ = ("atom_id", "created", "superseded")
    atom_id: str
    superseded: tuple[str, ...]
    created: bool

    def __init__(self, atom_id: str, superseded: tuple[str, ...] = (), created: bool = True) -> None:
        self.atom_id = atom_id
        self.superseded = superseded
        self.created = created


class SearchQuery(Value):
    """The arguments of one search (WIRE.md `POST /memory/read`)."""

    __slots__ = ("author", "exclude_author", "include_history", "order_by", "query", "scope", "since", "top_k", "until")
    query: str
    scope: str | None
    order_by: Literal["relevance", "recency"]
    since: int | None
    until: int | None
    exclude_author: str | None
    include_history: bool
    top_k: int
    author: str | None

    def __init__(
        self,
        query: str,
        scope: str | None = None,
        order_by: Literal["relevance", "recency"] = "relevance",
        since: int | None = None,
        until: int | None = None,
        exclude_author: str | None = None,
        include_history: bool = False,
        top_k: int = 10,
        author: str | None = None,
    ) -> None:
        self.query = query
        self.scope = scope
        self.order_by = order_by
        self.since = since
        self.until = until
        self.exclude_author = exclude_author
        self.include_history = include_history
        self.top_k = top_k
        self.author = author


class SearchHit(Value):
    """One search result: the entry and its relevance in [0, 1]."""

    __slots__ = ("entry", "relevance")
    entry: Entry
    relevance: float

    def __init__(self, entry: Entry, relevance: float) -> None:
        self.entry = entry
        self.relevance = relevance


class Room(Value):
    """A room the reader belongs to (wire `RoomListItem`)."""

    __slots__ = ("archived", "name", "role", "room_id", "scope")
    room_id: str
    name: str
    role: Literal["owner", "member"]
    scope: Literal["read", "read_write"]
    archived: bool

    def __init__(
        self,
        room_id: str,
        name: str,
        role: Literal["owner", "member"],
        scope: Literal["read", "read_write"],
        archived: bool = False,
    ) -> None:
        self.room_id = room_id
        self.name = name
        self.role = role
        self.scope = scope
        self.archived = archived

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


class Invite(Value):
    """A created invite (wire `InviteCreated`); the code is shown once."""

    __slots__ = ("code", "expires_at", "invite_id", "max_uses", "room_id", "scope")
    code: str
    room_id: str
    invite_id: str
    scope: str
    expires_at: int
    max_uses: int

    def __init__(self, code: str, room_id: str, invite_id: str, scope: str, expires_at: int, max_uses: int) -> None:
        self.code = code
        self.room_id = room_id
        self.invite_id = invite_id
        self.scope = scope
        self.expires_at = expires_at
        self.max_uses = max_uses

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


class InviteInfo(Value):
    """An invite as its room's owner lists it (wire `InviteInfoSchema`): audit fields, never the code."""

    __slots__ = ("created_at", "expires_at", "invite_id", "max_uses", "scope", "uses")
    invite_id: str
    scope: str
    max_uses: int
    uses: int
    expires_at: int
    created_at: int

    def __init__(self, invite_id: str, scope: str, max_uses: int, uses: int, expires_at: int, created_at: int) -> None:
        self.invite_id = invite_id
        self.scope = scope
        self.max_uses = max_uses
        self.uses = uses
        self.expires_at = expires_at
        self.created_at = created_at

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


class Stats(Value):
    """What `GET /memory/stats` counts in the caller's own store."""

    __slots__ = ("avg_valence", "concept_edges", "domains", "feedback", "fingerprints", "total_atoms")
    total_atoms: int
    domains: list[str]
    concept_edges: int
    avg_valence: float
    feedback: int
    fingerprints: int

    def __init__(
        self,
        total_atoms: int,
        domains: list[str],
        concept_edges: int,
        avg_valence: float,
        feedback: int,
        fingerprints: int = 0,
    ) -> None:
        self.total_atoms = total_atoms
        self.domains = domains
        self.concept_edges = concept_edges
        self.avg_valence = avg_valence
        self.feedback = feedback
        self.fingerprints = fingerprints


class Revision(Value):
    """One revision of a supersession chain."""

    __slots__ = ("entry", "is_head")
    entry: Entry
    is_head: bool

    def __init__(self, entry: Entry, is_head: bool) -> None:
        self.entry = entry
        self.is_head = is_head


class Chain(Value):
    """Every revision reachable from one atom by supersession links, oldest first."""

    __slots__ = ("atom_id", "dangling", "revisions", "truncated")
    atom_id: str
    revisions: list[Revision]
    dangling: list[str]
    truncated: bool

    def __init__(self, atom_id: str, revisions: list[Revision], dangling: list[str], truncated: bool) -> None:
        self.atom_id = atom_id
        self.revisions = revisions
        self.dangling = dangling
        self.truncated = truncated


class GraphEdge(Value):
    """Two concepts joined by the atoms that carry both."""

    __slots__ = ("count", "source", "target", "updated_at", "valence", "weight")
    source: str
    target: str
    weight: float
    valence: float
    count: int
    updated_at: int

    def __init__(self, source: str, target: str, weight: float, valence: float, count: int, updated_at: int) -> None:
        self.source = source
        self.target = target
        self.weight = weight
        self.valence = valence
        self.count = count
        self.updated_at = updated_at


class Graph(Value):
    __slots__ = ("edges", "min_weight_applied", "truncated")
    edges: list[GraphEdge]
    truncated: bool
    min_weight_applied: float

    def __init__(self, edges: list[GraphEdge], truncated: bool, min_weight_applied: float) -> None:
        self.edges = edges
        self.truncated = truncated
        self.min_weight_applied = min_weight_applied


class DomainWipe(Value):
    """What `DELETE /memory/domain/{d}` did."""

    __slots__ = ("deleted", "left_hidden", "skipped_secrets")
    deleted: int
    skipped_secrets: int
    left_hidden: int

    def __init__(self, deleted: int, skipped_secrets: int, left_hidden: int) -> None:
        self.deleted = deleted
        self.skipped_secrets = skipped_secrets
        self.left_hidden = left_hidden


class Joined(Value):
    """The answer to joining a room (wire `JoinedRoom`)."""

    __slots__ = ("already_member", "name", "room_id", "scope")
    room_id: str
    name: str
    scope: str
    already_member: bool

    def __init__(self, room_id: str, name: str, scope: str, already_member: bool) -> None:
        self.room_id = room_id
        self.name = name
        self.scope = scope
        self.already_member = already_member

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


class SecretInfo(Value):
    """A vault entry as listings show it: never the value."""

    __slots__ = ("alias", "concepts", "context", "created_at")
    alias: str
    context: str
    created_at: int
    concepts: tuple[str, ...]

    def __init__(self, alias: str, context: str, created_at: int, concepts: tuple[str, ...] = ()) -> None:
        self.alias = alias
        self.context = context
        self.created_at = created_at
        self.concepts = concepts

    def wire(self) -> dict[str, Any]:
        """The wire `SecretListItem`: alias, context, time and concepts (there is no value to show)."""
        return {
            "alias": self.alias,
            "context": self.context,
            "created_at": timefmt.to_iso(self.created_at),
            "concepts": list(self.concepts),
        }


class KeyInfo(Value):
    """An API key as listings show it: never the key."""

    __slots__ = ("created_at", "key_id", "principal", "revoked")
    key_id: str
    principal: str
    created_at: int
    revoked: bool

    def __init__(self, key_id: str, principal: str, created_at: int, revoked: bool) -> None:
        self.key_id = key_id
        self.principal = principal
        self.created_at = created_at
        self.revoked = revoked

    def wire(self) -> dict[str, Any]:
        """CLI.md's `keys list` item."""
        return {
            "key_id": self.key_id,
            "principal": self.principal,
            "created_at": timefmt.to_iso(self.created_at),
            "revoked": self.revoked,
        }


class Watermark(Value):
    """The newest instant a finished walk saw, and the ids delivered at/near it (the boundary ids)."""

    __slots__ = ("boundary_ids", "consumer", "created_at", "scope", "updated_at")
    scope: str | None
    consumer: str
    created_at: int | None
    boundary_ids: tuple[str, ...]
    updated_at: int

    def __init__(
        self, scope: str | None, consumer: str, created_at: int | None, boundary_ids: tuple[str, ...], updated_at: int
    ) -> None:
        self.scope = scope
        self.consumer = consumer
        self.created_at = created_at
        self.boundary_ids = boundary_ids
        self.updated_at = updated_at


class WalkProgress(Value):
    """How far a walk of the feed has come: what a checkpoint saves and a resumed walk continues from.

    Attributes:
        cursor: the cursor of the next page (None before the first page, and at the end).
        done: the walk has read a page without a cursor.
        newest: the newest instant seen; `newest_ids` the ids seen within the overlap below it.
        pages: requests made; `delivered` fresh entries yielded; `repeats` held entries dropped.
    """

    __slots__ = ("cursor", "delivered", "done", "newest", "newest_ids", "pages", "repeats")
    cursor: str | None
    done: bool
    newest: int | None
    newest_ids: tuple[str, ...]
    pages: int
    delivered: int
    repeats: int

    def __init__(
        self,
        cursor: str | None = None,
        done: bool = False,
        newest: int | None = None,
        newest_ids: tuple[str, ...] = (),
        pages: int = 0,
        delivered: int = 0,
        repeats: int = 0,
    ) -> None:
        self.cursor = cursor
        self.done = done
        self.newest = newest
        self.newest_ids = newest_ids
        self.pages = pages
        self.delivered = delivered
        self.repeats = repeats


class RoomRef(Value):
    """A room named in an empty report."""

    __slots__ = ("address", "name")
    name: str
    address: str

    def __init__(self, name: str, address: str) -> None:
        self.name = name
        self.address = address


class EmptyReport(Value):
    """What an empty answer covered (CLI.md `empty_report`).

    `text` is the wire's, with stored names exact (JSON is for machines); `shown` is the same
    report for a person's terminal, every stored name in it passed through `mnemo_tui.text`
    (a room name's newline as `⏎`, so it cannot forge a line of the report).
    """

    __slots__ = ("kind", "scope", "shown", "text", "unsearched_rooms")
    kind: EmptyKind
    scope: str | None
    text: str
    unsearched_rooms: tuple[RoomRef, ...]
    shown: str

    def __init__(
        self, kind: EmptyKind, scope: str | None, text: str, unsearched_rooms: tuple[RoomRef, ...] = (), shown: str = ""
    ) -> None:
        self.kind = kind
        self.scope = scope
        self.text = text
        self.unsearched_rooms = unsearched_rooms
        self.shown = shown or block(text)

    def wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "scope": self.scope,
            "text": self.text,
            "unsearched_rooms": [{"name": r.name, "address": r.address} for r in self.unsearched_rooms],
        }
