"""Provides how the remote backend reads wire bodies: items into `Entry` values, pages with each item's own text."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson

from mnemo_tui import timefmt
from mnemo_tui.errors import Unavailable, ValidationError
from mnemo_tui.limits import dumps as _dumps
from mnemo_tui.model import Entry, Page

_DECODER = json.JSONDecoder()
# The C scanner under `raw_decode`, called directly (once per item of a page): it raises StopIteration
# where `raw_decode` raises JSONDecodeError, and both end as the ValueError of `object_with_spans`.
_scan: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_WS = re.compile(r"[ \t\n\r]*")
_BLANK = frozenset(" \t\n\r")
# ASCII digits only (`\d` would take any script's) and a clock time that exists; the date is checked
# where it is read (`_canonical_us`: February 30th is a ValueError there).
_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
_CANONICAL_TIME = re.compile(_TIME + r"\Z")
# The canonical time's shape, its digits read as 0 (see `_bulk`).
_ZEROS = str.maketrans("0123456789", "0" * 10)
_SHAPE = "0000-00-00T00:00:00.000000Z"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)


_MIN_US = timefmt.from_datetime(datetime(1, 1, 1, tzinfo=UTC))
_MAX_US = timefmt.from_datetime(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))


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


def entry_of(item: Any, text: str | None = None) -> Entry:
    """An `Entry` from any item the service returns (RecentItem, MemoryItem, AtomDetail).

    The wire text is the RecentItem of WIRE.md in its canonical field order, with times in the
    microsecond `Z` form; fields outside RecentItem are dropped, optional ones may be absent.
    """
    if not isinstance(item, dict):
        raise Unavailable("the endpoint answered with an item that is not an object")
    if text is not None and _canonical(item, text):
        # Already the RecentItem as `mnemo serve` stores it: keep its own text, skip re-encoding.
        try:
            return Entry.of(atom_id=item["atom_id"], created_at=_canonical_us(item["created_at"]), wire=text)
        except ValueError:
            pass  # a date that does not exist (February 30th): read below, its text kept
    atom = item.get("atom_id") or item.get("id")
    if not isinstance(atom, str) or not atom:
        raise Unavailable("the endpoint answered with an item without an atom_id")
    raw_time = item.get("created_at")
    created = time_of(raw_time)
    wire: dict[str, Any] = {
        "atom_id": atom,
        "content": str(item.get("content") or ""),
        "domain": str(item.get("domain") or ""),
        "created_at": timefmt.to_iso(created) if created is not None else raw_time,
        "concepts": [str(c) for c in item.get("concepts") or []],
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


@lru_cache(maxsize=4096)
def _minute_us(minute: str) -> int:
    """Microseconds of `YYYY-MM-DDTHH:MM` (a page's entries mostly share their minute: computed once)."""
    day = (date.fromisoformat(minute[:10]).toordinal() - _EPOCH_DAY) * 86_400_000_000
    return day + int(minute[11:13]) * 3_600_000_000 + int(minute[14:16]) * 60_000_000


def _canonical_us(text: str) -> int:
    """Microseconds of a time already in the canonical `YYYY-MM-DDTHH:MM:SS.ffffffZ` form."""
    # `SS` then `ffffff` read as one number are the seconds' microseconds: SS * 10**6 + ffffff.
    return _minute_us(text[:16]) + int(text[17:19] + text[20:26])


def _key_orders() -> frozenset[tuple[str, ...]]:
    base = ("atom_id", "content", "domain", "created_at", "concepts")
    optional = ("provenance", "supersedes", "superseded_by")
    orders = set()
    for mask in range(8):
        orders.add(base + tuple(name for bit, name in enumerate(optional) if mask >> bit & 1))
    return frozenset(orders)


_KEY_ORDERS = _key_orders()


def _canonical(item: dict[str, Any], text: str) -> bool:
    """Whether an item's own text is already a canonical RecentItem (fields in order, times in `Z` form)."""
    if tuple(item) not in _KEY_ORDERS or "\n" in text or "\r" in text:
        return False
    created = item["created_at"]
    if not isinstance(created, str) or _CANONICAL_TIME.match(created) is None:
        return False
    if not isinstance(item["atom_id"], str) or not item["atom_id"]:
        return False
    if "provenance" in item and not isinstance(item["provenance"], dict):
        return False
    if "supersedes" in item and not (isinstance(item["supersedes"], list) and item["supersedes"]):
        return False
    return "superseded_by" not in item or (isinstance(item["superseded_by"], str) and bool(item["superseded_by"]))


def _skip(text: str, index: int) -> int:
    found = _WS.match(text, index)
    return found.end() if found else index


def object_with_spans(text: str, field: str) -> tuple[dict[str, Any], list[str]]:
    """Parse a JSON object, keeping the exact text of each element of its array `field`.

    Raises:
        ValueError: the text is not one JSON object.
    """
    try:
        return _object_with_spans(text, field)
    except (IndexError, RecursionError, StopIteration, json.JSONDecodeError) as exc:
        raise ValueError(str(exc)) from None


def _object_with_spans(text: str, field: str) -> tuple[dict[str, Any], list[str]]:
    out: dict[str, Any] = {}
    spans: list[str] = []
    i = _skip(text, 0)
    if text[i] != "{":
        raise ValueError("not an object")
    i = _skip(text, i + 1)
    if text[i] == "}":
        i += 1
    else:
        while True:
            key, i = _scan(text, i)
            if not isinstance(key, str):
                raise ValueError("object key is not a string")
            i = _skip(text, i)
            if text[i] != ":":
                raise ValueError("expected ':'")
            i = _skip(text, i + 1)
            if key == field and text[i] == "[":
                items: list[Any] = []
                spans = []
                i = _skip(text, i + 1)
                if text[i] == "]":
                    i += 1
                else:
                    decode = _scan
                    while True:
                        start = i
                        value, i = decode(text, i)
                        items.append(value)
                        spans.append(text[start:i])
                        mark = text[i]
                        if mark in _BLANK:
                            i = _skip(text, i)
                            mark = text[i]
                        i += 1
                        if mark == "]":
                            break
                        if mark != ",":
                            raise ValueError("expected ',' or ']'")
                        if text[i] in _BLANK:
                            i = _skip(text, i)
                out[key] = items
            else:
                out[key], i = _scan(text, i)
            i = _skip(text, i)
            mark, i = text[i], i + 1
            if mark == "}":
                break
            if mark != ",":
                raise ValueError("expected ',' or '}'")
            i = _skip(text, i)
    if _skip(text, i) != len(text):
        raise ValueError("extra data after the object")
    return out, spans


# `mnemo serve` says so of a page whose items are its stored RecentItems (see `page_of`).
CANONICAL_HEADER = "x-mnemo-wire"


def _page_parts(text: str) -> tuple[list[Any], list[str], str | None]:
    try:
        body, spans = object_with_spans(text, "items")
    except ValueError:
        raise Unavailable("the endpoint answered /memory/recent with a body that is not JSON") from None
    items = body.get("items")
    if not isinstance(items, list):
        raise Unavailable("the endpoint answered /memory/recent without an items list")
    cursor = body.get("next_cursor")
    return items, spans, cursor if isinstance(cursor, str) and cursor else None


# How `mnemo serve` lays a page out: its items first, the stored texts joined by commas.
_ITEMS_HEAD = b'{"items":['


def _encoded_parts(raw: bytes) -> tuple[list[Any], list[str], str | None] | None:
    """A page laid out as `mnemo serve` lays it, read by orjson; None for any other (`_page_parts` reads it).

    Each item's own text is its encoding by orjson, proven so by the page holding those encodings,
    joined by commas, exactly where its items array is: one C decode of the page and one C encode
    of each item, where the standard library must call its scanner once for each item. A body
    orjson refuses (it is stricter than `json`) or another spelling of an item goes the other way.
    """
    if not raw.startswith(_ITEMS_HEAD):
        return None
    try:
        body = orjson.loads(raw)
        items = body["items"]
        if type(items) is not list:
            return None
        encoded = list(map(orjson.dumps, items))
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, KeyError, TypeError):
        return None
    joined = b",".join(encoded)
    end = len(_ITEMS_HEAD) + len(joined)
    if not raw.startswith(joined, len(_ITEMS_HEAD)) or raw[end : end + 1] != b"]":
        return None
    cursor = body.get("next_cursor")
    return items, list(map(bytes.decode, encoded)), cursor if isinstance(cursor, str) and cursor else None


def page_of(body: bytes | str, canonical: bool = False) -> Page:
    """A feed page from the body of a `RecentResponse`; a `next_cursor` absent or `""` ends the walk.

    `canonical`: the endpoint said its items are its stored RecentItems (`CANONICAL_HEADER`); a page
    without a line break is then trusted whole (`_bulk`).

    Raises:
        Unavailable: the body is not a page.
    """
    if isinstance(body, bytes):
        parts = _encoded_parts(body)
        flat = b"\n" not in body and b"\r" not in body
        text = body.decode("utf-8", errors="replace") if parts is None else ""
    else:
        parts, text = None, body
        flat = "\n" not in body and "\r" not in body
    items, spans, cursor = _page_parts(text) if parts is None else parts
    if canonical and flat:
        entries = _bulk(items, spans)
        if entries is None:
            entries = [_trusted(item, span) for item, span in zip(items, spans, strict=True)]
        return Page(items=entries, next_cursor=cursor)
    return Page(items=[entry_of(item, span) for item, span in zip(items, spans, strict=True)], next_cursor=cursor)


def _bulk(items: list[Any], spans: list[str]) -> list[Entry] | None:
    """The entries of a trusted page whose every item has an atom id and a canonical time; None when one
    item has not (each is then read on its own, `_trusted`)."""
    try:
        atoms = [item["atom_id"] for item in items]
        times = [item["created_at"] for item in items]
        joined = "\n".join(times)  # a time that is not a string is a TypeError
    except (KeyError, TypeError):
        return None
    if not all(atoms) or set(map(type, atoms)) - {str} or len(spans) != len(atoms):
        return None
    # Every time in the canonical shape, checked at once: the digits read as 0 (any other character, a
    # digit of another script too, stays itself) against the shape repeated, the line breaks where the
    # shape has them. `24:00`, which a later Python may read as the next midnight, is refused too.
    if joined.translate(_ZEROS) != "\n".join([_SHAPE] * len(times)) or "T24" in joined:
        return None
    try:
        # The C parser reads each time (one that does not exist is a ValueError).
        instants = [(datetime.fromisoformat(created) - _EPOCH) // _ONE_US for created in times]
    except ValueError:
        return None
    return list(map(Entry, instants, atoms, spans))


def _trusted(item: Any, span: str) -> Entry:
    """One item of a trusted page: its own text kept when it has an atom id and a canonical time."""
    created = item.get("created_at") if isinstance(item, dict) else None
    atom = item.get("atom_id") if isinstance(created, str) else None
    if isinstance(atom, str) and atom and isinstance(created, str) and _CANONICAL_TIME.match(created):
        try:
            return Entry(_canonical_us(created), atom, span)
        except ValueError:
            pass  # a date that does not exist
    return entry_of(item, span)
