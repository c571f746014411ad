"""Provides how the remote backend reads wire bodies: items into `Entry` values, pages with each item's own text."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import Annotated, Any

import msgspec

from mnemo_tui import timefmt
from mnemo_tui.errors import Unavailable, ValidationError
from mnemo_tui.limits import dumps as _dumps
from mnemo_tui.values.model import Entry, Page
from mnemo_tui.values.text_page import TextPage

_MIN_US = timefmt.from_datetime(datetime(1, 1, 1, tzinfo=UTC))
_MAX_US = timefmt.from_datetime(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))
# The canonical time's shape (docs/cli.md), its digits read as 0 (see `_times`).
_ZEROS = bytes.maketrans(b"0123456789", b"0" * 10)
_SHAPE = b"0000-00-00T00:00:00.000000Z"
_ATOM_ID = attrgetter("atom_id")
_CREATED_AT = attrgetter("created_at")

# `mnemo serve` says so of a page whose items are its stored RecentItems (see `page_of`).
CANONICAL_HEADER = "x-mnemo-wire"


def wire_time(us: int | None) -> str | None:
    """A time for the wire; instants beyond what ISO-8601 can spell are clamped (no entry lies there)."""
    return None if us is None else timefmt.to_iso(min(max(us, _MIN_US), _MAX_US))


def time_of(value: Any) -> int | None:
    """Microseconds of a wire time, or None when it is absent or not an ISO-8601 instant."""
    if isinstance(value, str) and value:
        try:
            return timefmt.parse_iso(value, field="created_at")
        except ValidationError:
            return None
    return None


def entry_of(item: Any) -> Entry:
    """An `Entry` from any item the service returns (RecentItem, MemoryItem, AtomDetail), its text written anew.

    The wire text is the RecentItem of docs/server.md in its canonical field order, with times in the
    microsecond `Z` form; fields outside RecentItem are dropped, optional ones may be absent.

    Raises:
        Unavailable: the item is not an object, or has no atom id.
    """
    if not isinstance(item, dict):
        raise Unavailable("the endpoint answered with an item that is not an object")
    atom = item.get("atom_id") or item.get("id")
    if not isinstance(atom, str) or not atom:
        raise Unavailable("the endpoint answered with an item without an atom_id")
    raw_time = item.get("created_at")
    created = time_of(raw_time)
    concepts = item.get("concepts") or []
    wire: dict[str, Any] = {
        "atom_id": atom,
        "content": str(item.get("content") or ""),
        "domain": str(item.get("domain") or ""),
        "created_at": timefmt.to_iso(created) if created is not None else raw_time,
        # A list (or a text, or an object: their characters, their keys) as its strings; a number, one concept.
        "concepts": [str(c) for c in concepts] if isinstance(concepts, list | str | dict) else [str(concepts)],
    }
    provenance = item.get("provenance")
    if isinstance(provenance, dict):
        wire["provenance"] = provenance
    supersedes = item.get("supersedes")
    if isinstance(supersedes, list) and supersedes:
        wire["supersedes"] = supersedes
    superseded_by = item.get("superseded_by")
    if isinstance(superseded_by, str) and superseded_by:
        wire["superseded_by"] = superseded_by
    return Entry.of(atom_id=atom, created_at=created or 0, wire=_dumps(wire))


# The structs hold strings, lists of strings and each other, never a cycle: `gc=False` keeps them out of the
# collector's tracking (a page's decode made ~4 tracked objects an item).
class _Page(msgspec.Struct, gc=False):
    """A `RecentResponse` as msgspec delimits it: each item's own bytes (`Raw`, not decoded), the cursor."""

    items: list[msgspec.Raw]
    next_cursor: Any = None


_Id = Annotated[str, msgspec.Meta(min_length=1)]
_Name = str | None


class _Provenance(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """docs/server.md's provenance, each field of its type, and no other."""

    principal: _Name = None
    agent: _Name = None
    agent_name: _Name = None
    client_env: _Name = None
    is_external: bool = False


class _Item(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A RecentItem whose own text is kept as its wire JSON: docs/server.md's fields only, each of its type. Only the
    id and the time are used; the rest is checked and passed on as the text that is printed."""

    atom_id: _Id
    content: str
    domain: str
    created_at: str  # canonical, checked a page at a time (`_times`)
    concepts: list[str]
    provenance: _Provenance | msgspec.UnsetType = msgspec.UNSET
    supersedes: Annotated[list[str], msgspec.Meta(min_length=1)] | msgspec.UnsetType = msgspec.UNSET
    superseded_by: _Id | msgspec.UnsetType = msgspec.UNSET


_PAGE = msgspec.json.Decoder(_Page)
_ITEM = msgspec.json.Decoder(_Item)
# An item's keys in the order they first occur (a key that repeats keeps its first place, as `json` has it).
_KEYS = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _key_orders() -> frozenset[tuple[str, ...]]:
    base = ("atom_id", "content", "domain", "created_at", "concepts")
    optional = ("provenance", "supersedes", "superseded_by")
    return frozenset(base + tuple(name for bit, name in enumerate(optional) if mask >> bit & 1) for mask in range(8))


# docs/server.md's field order, with or without each optional field.
_KEY_ORDERS = _key_orders()


def page_of(body: bytes | str, canonical: bool = False) -> Page:
    """A feed page from the body of a `RecentResponse` (`read_page`), as `Page` values.

    Raises:
        Unavailable: the body is not a page, or an item is not an object with an atom id, or not UTF-8.
    """
    read = read_page(body, canonical)
    return read if isinstance(read, Page) else read.page()


def read_page(body: bytes | str, canonical: bool = False, line: bool = False) -> Page | TextPage:
    """A feed page from the body of a `RecentResponse`; a `next_cursor` absent or `""` ends the walk.

    msgspec delimits the items (each one's own bytes, as the endpoint sent them); an item that is a
    RecentItem as docs/server.md spells it (`_one`) keeps that text as its wire JSON, never re-encoded; any
    other is read by the standard library and written anew (`entry_of`). `canonical`: the endpoint said
    its items are its stored RecentItems (`CANONICAL_HEADER`), so the rule is first tried on the whole
    page at once (`_framed`): a page whose every item keeps its text is a `TextPage`, its `Entry` values
    built only if asked for. `line`: the body is a line of the streamed walk, which holds no `\n` (the stream
    was cut there), so that one is not searched for again.

    Raises:
        Unavailable: the body is not a page, or an item is not an object with an atom id, or not UTF-8.
    """
    try:
        raw = body if isinstance(body, bytes) else body.encode()
        framed = _framed(raw, line) if canonical else None
        if framed is not None:
            return framed
        page = _PAGE.decode(raw)
    except msgspec.ValidationError:
        raise Unavailable("the endpoint answered /memory/recent without an items list") from None
    except (msgspec.DecodeError, UnicodeError, RecursionError):
        raise Unavailable("the endpoint answered /memory/recent with a body that is not JSON") from None
    cursor = page.next_cursor
    return Page(list(map(_one, page.items, repeat(canonical))), cursor if isinstance(cursor, str) and cursor else None)


def _one_line(raw: bytes) -> bool:
    """Whether an item's text (or a page of them) can be printed as it came: on one line (NDJSON's framing)."""
    return b"\n" not in raw and b"\r" not in raw


_TIMES = msgspec.json.Decoder(list[datetime])


def _times(times: list[str]) -> list[datetime] | None:
    """The instants of canonical times (`YYYY-MM-DDTHH:MM:SS.ffffffZ`), read all at once; None when one is
    not canonical or names no instant (February 30th)."""
    # Every time in the canonical shape, checked at once: joined as the inside of a JSON array, ASCII, the digits
    # read as 0 (a digit of another script is no ASCII), against the shape joined so (only 27 characters
    # between the separators can match it). Then one msgspec call reads them all as RFC 3339 instants (in C): on
    # this shape it refuses what `datetime.fromisoformat` refuses (`24:00`, a 60th second, a day the month lacks).
    if not times:
        return []
    try:
        joined = '","'.join(times).encode("ascii")
    except UnicodeEncodeError:
        return None
    if joined.translate(_ZEROS) != _shapes(len(times)):
        return None
    try:
        return _TIMES.decode(b'["' + joined + b'"]')
    except msgspec.DecodeError:
        return None


@lru_cache(maxsize=4)
def _shapes(count: int) -> bytes:
    return b'","'.join([_SHAPE] * count)


def _one(span: msgspec.Raw, trusted: bool) -> Entry:
    """One item on its own: its text kept when it is one line, decodes as `_Item` with a canonical time, and
    (unless `trusted`: the endpoint declared its texts canonical) has its fields in docs/server.md's order; else read
    by the standard library and written anew.

    Raises:
        Unavailable: not UTF-8, not an object with an atom id, or nested too deeply.
    """
    raw = bytes(span)
    if _one_line(raw):
        try:
            item = _ITEM.decode(raw)
            times = _times([item.created_at]) if trusted or tuple(_KEYS.decode(raw)) in _KEY_ORDERS else None
            if times is not None:
                return Entry(timefmt.from_datetime(times[0]), item.atom_id, raw.decode())
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass  # another shape (the hosted service's), or not UTF-8: read below
    try:
        return entry_of(json.loads(raw.decode()))
    except UnicodeDecodeError:
        raise Unavailable("the endpoint answered with an item that is not UTF-8") from None
    except RecursionError:
        raise Unavailable("the endpoint answered with an item nested too deeply") from None


# A page as `mnemo serve` writes it (docs/server.md, "A feed page on the wire"): its items' texts joined by commas
# between these two, then the cursor's JSON and `}`; each item after the first opens with its `atom_id`.
_HEAD = b'{"items":['
_TAIL = b'],"next_cursor":'
_BETWEEN = b'},{"atom_id":'
_BETWEEN_LINES = b'}\n{"atom_id":'
_ITEM_LIST = msgspec.json.Decoder(list[_Item])
_CURSOR = msgspec.json.Decoder(str | None)


def _framed(raw: bytes, line: bool = False) -> TextPage | None:
    """A page laid out as `mnemo serve` writes it whose every item keeps its text (the rule of `_one`, held to it by
    the tests), read with one decode of its items: None when it is laid out otherwise or one item does not keep
    its text (the page is then read item by item).

    The items' array is decoded where it stands in the line (`list[_Item]`, every string read, so UTF-8 checked,
    nothing else allowed), the cursor after it, so the line is that array and that cursor and nothing else.
    Then each item's text is where it stands: `},{"atom_id":` can only be the boundary of two items of that
    array (its quote opens a key, so the comma and braces around it are outside any string, and no list of a
    RecentItem holds objects), and when it occurs once fewer than there are items, every boundary is one and
    the texts are the line between the brackets cut there (and joined again by line breaks). No text is decoded
    or re-encoded. `line`: `raw` is known to hold no `\n` (a line of the stream), so only `\r` is looked for.
    """
    end = raw.rfind(_TAIL)
    if end < len(_HEAD) or not raw.startswith(_HEAD) or not raw.endswith(b"}"):
        return None
    if b"\r" in raw or (not line and b"\n" in raw):  # `_one_line`, a search of the line less for a streamed one
        return None
    view = memoryview(raw)
    try:
        cursor = _CURSOR.decode(view[end + len(_TAIL) : -1])
        items = _ITEM_LIST.decode(view[len(_HEAD) - 1 : end + 1])
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    times = _times(list(map(_CREATED_AT, items)))
    if times is None:
        return None
    if not items:
        return TextPage(b"", [], [], cursor or None)
    if raw[len(_HEAD)] != 0x7B or raw[end - 1] != 0x7D:  # `{` first, `}` last: no space around the items
        return None
    pieces = raw.split(_BETWEEN)  # the line cut where its items meet
    if len(pieces) != len(items):
        return None
    pieces[0] = pieces[0][len(_HEAD) :]
    pieces[-1] = pieces[-1][: end - len(raw)] + b"\n"
    return TextPage(_BETWEEN_LINES.join(pieces), list(map(_ATOM_ID, items)), times, cursor or None)
