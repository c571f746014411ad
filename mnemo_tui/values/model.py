"""Provides `Value`, the one way the package declares a value, and the values of the feed: an entry, a page, the
query of a page, a watermark, a walk's progress and an empty report."""

from __future__ import annotations

import json
from itertools import repeat
from typing import TYPE_CHECKING, NamedTuple, dataclass_transform

from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import DEFAULT_LIMIT, check_limit, cursor_shaped, parse_scope
from mnemo_tui.sanitize import block

if TYPE_CHECKING:
    from typing import Any, Literal, Self

    EmptyKind = Literal["empty_scope", "nothing_new", "no_match", "past_cursor"]
else:
    EmptyKind = str  # the Literal above, for the type checker only


class _Declared(type):
    """Makes the annotated names of a `Value` class its `__slots__`, and its public ones its fields in order,
    with the values written after them as their defaults."""

    _fields: tuple[str, ...]
    _defaults: dict[str, Any]
    _named: frozenset[str]
    _checks: bool

    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **options: Any) -> None:
        super().__init__(name, bases, ns)

    # `options`: `kw_only=True` (a class whose own fields without defaults follow inherited ones with
    # defaults): for the type checker; at run time every field may be given by name anyway.
    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **options: Any) -> _Declared:
        own = list(ns.get("__annotations__", {}))
        fields = [n for n in own if not n.startswith("_")]
        defaults = {n: ns.pop(n) for n in fields if n in ns}
        caches = [n for n in own if n.startswith("_") and n not in ns]
        ns["__slots__"] = (*ns.get("__slots__", ()), *fields, *caches)
        cls = super().__new__(mcls, name, bases, ns)
        cls._fields = (*getattr(cls, "_fields", ()), *fields)
        cls._defaults = {**getattr(cls, "_defaults", {}), **defaults}
        cls._named = frozenset(cls._fields)
        # Whether a `__post_init__` of its own (or an ancestor's) is to be called: the base's does nothing.
        cls._checks = getattr(cls, "_checks", False) or (bool(bases) and "__post_init__" in ns)
        return cls


@dataclass_transform(frozen_default=True)
class Value(metaclass=_Declared):
    """The one way the package declares a value (immutable data with fields: a query, a page, a request, the
    options a command was given): each field is declared once, as an annotation with its default after it,
    and set once by the one constructor here; `kw_only=True` as a class keyword lets a class's own fields
    without defaults follow inherited ones with defaults. An object that changes (a window, a bucket) is a
    plain class with `__slots__` and an `__init__` instead.

    Not dataclasses: their import and the code they generate per class were most of a cold start of
    `mnemo recent` (docs/performance.md). A value compares, hashes and shows itself by its fields as a
    frozen dataclass does, runs its `__post_init__` once its fields are set, and `replace` makes a changed copy.
    Immutable by convention (the type checker holds it): nothing assigns a field after construction;
    annotated names starting with `_` (and no value) are slots for caches, outside the fields. Every field
    given in order is the quick way to build one (a page's values, a request's). The one exception is `Entry`,
    a named tuple: a page builds one per row with `Entry._make(row)`, measured five times quicker than a `Value`
    of the same three fields.
    """

    __slots__ = ()
    _checks: bool = False
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}  # noqa: RUF012 (read only)
    _named: frozenset[str] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        if kwargs or len(args) != len(fields):  # every field given in order is the quick way (a page)
            args = self._arguments(args, kwargs)
        # The fields set by a loop in C (`any` runs the map to its end: each call returns None): a loop of
        # bytecode cost about as much again as the rest of a construction.
        any(map(setattr, repeat(self), fields, args))
        if self._checks:
            self.__post_init__()

    def __post_init__(self) -> None:
        """What a value checks or derives once its fields are set (nothing, unless a class says so)."""

    @classmethod
    def _arguments(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Every field's value in order: the positional ones, then those given by name, then the defaults."""
        fields = cls._fields
        given = len(args)
        if given > len(fields):
            raise TypeError(f"{cls.__name__} takes at most {len(fields)} positional arguments")
        # Set operations and `map` in C: a value built by name (most of them) paid ~20k instructions here.
        named = kwargs.keys()
        if not named <= cls._named or (given and not named.isdisjoint(fields[:given])):
            wrong = next(name for name in kwargs if name not in cls._named or name in fields[:given])
            raise TypeError(f"{cls.__name__} got an unknown or repeated field {wrong!r}")
        values = cls._defaults | kwargs
        try:
            return args + tuple(map(values.__getitem__, fields[given:]))
        except KeyError as missing:
            raise TypeError(f"{cls.__name__} needs {missing.args[0]!r}") from None

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
        """A copy with `changes` to some fields (what `dataclasses.replace` does)."""
        fields = {name: getattr(self, name) for name in self._fields}
        fields.update(changes)
        return type(self)(**fields)


# created_at: microseconds since the epoch, UTC, assigned by the store; wire: the wire item as stored and
# sent (`RecentItem`), compact JSON. The functional form: the class form's types would be this module's
# annotation strings, which `typing` compiles, and a first `compile()` is dear at start (docs/performance.md).
_EntryFields = NamedTuple("_EntryFields", [("created_at", int), ("atom_id", str), ("wire", str)])  # noqa: UP014


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


def by_author(entry: Entry, spec: str) -> bool:
    """Whether an entry is by the author `spec`: its principal, or the AUTHOR column's `principal/agent`.

    The engine's SQL (`engine/feed.py`) says the same; a client applies this where its endpoint cannot.
    """
    return entry.provenance.get("principal") == spec or entry.author == spec


class Page(Value):
    """One page of the feed: the entries, newest first, and the cursor for the next one (None at the end)."""

    items: list[Entry]
    next_cursor: str | None


class WirePage(Value):
    """A feed page as the entries' wire texts (what the server sends), and the next cursor."""

    items: list[str]
    next_cursor: str | None


class RecentQuery(Value):
    """The arguments of one feed read (docs/server.md `POST /memory/recent`)."""

    scope: str | None = None
    since: int | None = None
    until: int | None = None
    exclude_author: str | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    include_history: bool = False
    author: str | None = None

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


class Watermark(Value):
    """The newest instant a finished walk saw, and the ids delivered at/near it (the boundary ids)."""

    scope: str | None
    consumer: str
    created_at: int | None
    boundary_ids: tuple[str, ...]
    updated_at: int


class WalkProgress(Value):
    """How far a walk of the feed has come: what a checkpoint saves and a resumed walk continues from.

    Attributes:
        cursor: the cursor of the next page (None before the first page, and at the end).
        done: the walk has read a page without a cursor.
        newest: the newest instant seen; `newest_ids` the ids seen within the overlap below it.
        pages: pages read (a request each, or a line of a streamed walk); `delivered` fresh entries
            yielded; `repeats` held entries dropped.
    """

    cursor: str | None = None
    done: bool = False
    newest: int | None = None
    newest_ids: tuple[str, ...] = ()
    pages: int = 0
    delivered: int = 0
    repeats: int = 0


class RoomRef(Value):
    """A room named in an empty report."""

    name: str
    address: str


class EmptyReport(Value):
    """What an empty answer covered (docs/cli.md `empty_report`).

    `text` is the wire's, with stored names exact (JSON is for machines); `shown` is the same
    report for a person's terminal, every stored name in it passed through `mnemo_tui.sanitize`
    (a room name's newline as `⏎`, so it cannot forge a line of the report).
    """

    kind: EmptyKind
    scope: str | None
    text: str
    unsearched_rooms: tuple[RoomRef, ...] = ()
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
