"""The remote backend's page read: each item's own text kept when it is a RecentItem, the whole-page read held to the
item-by-item one, and malformed or hostile items refused, never handed on to be printed."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_tui import timefmt
from mnemo_tui.backends import remote_wire
from mnemo_tui.backends.remote_wire import page_of, read_page
from mnemo_tui.errors import Unavailable
from mnemo_tui.values.model import Page
from mnemo_tui.values.text_page import TextPage

ITEM = {
    "atom_id": "00000000-0000-4000-8000-000000000001",
    "content": "x",
    "domain": "general",
    "created_at": "2026-01-01T00:00:00.000001Z",
    "concepts": [],
}
COMPACT = json.dumps(ITEM, separators=(",", ":"))


def _as(kind: str, text: str) -> bytes | str:
    """A body as the backend hands it to `page_of` (the answer's bytes), or as text."""
    return text.encode() if kind == "bytes" else text


def _page(*texts: str, cursor: str | None = "c") -> bytes:
    return ('{"items":[' + ",".join(texts) + '],"next_cursor":' + json.dumps(cursor) + "}").encode()


def _read(body: bytes | str) -> Page | type[Unavailable]:
    """The page as read declared canonical (the whole page at once first), or Unavailable."""
    try:
        return page_of(body, True)
    except Unavailable:
        return Unavailable


def _read_alone(body: bytes) -> Page | type[Unavailable]:
    """The page declared canonical read item by item (what the whole-page read stands for), or Unavailable."""
    try:
        page = page_of(body, True)  # the body's own refusals, and its cursor
        spans = remote_wire._PAGE.decode(body).items
        return Page([remote_wire._one(span, True) for span in spans], page.next_cursor)
    except Unavailable:
        return Unavailable


@pytest.mark.parametrize("kind", ["bytes", "text"])
def test_a_page_declared_canonical_keeps_each_items_text_but_never_a_line_break(kind: str) -> None:
    page = _page(COMPACT, COMPACT).decode()
    assert [e.wire for e in page_of(_as(kind, page), canonical=True).items] == [COMPACT, COMPACT]
    pretty = json.dumps({"items": [ITEM], "next_cursor": None}, indent=2)
    assert [e.wire for e in page_of(_as(kind, pretty), canonical=True).items] == [COMPACT]
    odd = {**ITEM, "created_at": "2026-01-01T01:00:00.000001+01:00", "extra": 1}
    entry = page_of(_as(kind, json.dumps({"items": [odd]})), canonical=True).items[0]
    assert entry.wire == COMPACT and entry.created_at == page_of(_as(kind, page)).items[0].created_at


@pytest.mark.parametrize(
    "spelled",
    [
        '{"atom_id":"00000000-0000-4000-8000-00000000000a","content":"caf\\u00e9","domain":"d",'
        '"created_at":"2026-01-01T00:00:00.000001Z","concepts":[]}',
        '{"atom_id":"00000000-0000-4000-8000-00000000000a","content":"x","domain":"d",'
        '"created_at":"2026-01-01T00:00:00.000001Z","concepts":[],"provenance":{"principal":"p\\u0061","is_external":false}}',
        '{"atom_id":"00000000-0000-4000-8000-00000000000a", "content":"x","domain":"d",'
        '"created_at":"2026-01-01T00:00:00.000001Z","concepts":[]}',
    ],
    ids=["escaped-letter", "escaped-provenance", "a-space"],
)
def test_a_recent_item_spelled_otherwise_keeps_its_own_text(spelled: str) -> None:
    # The text printed is the endpoint's own, never re-encoded, whatever JSON spelling its values have: it is one
    # line, and the item it spells is a RecentItem, its fields in docs/server.md's order, with the id and time checked.
    other = '{"atom_id":"00000000-0000-4000-8000-00000000000b","content":"y","domain":"d",' + (
        '"created_at":"2026-01-01T00:00:00.000000Z","concepts":[]}'
    )
    body = _page(other, spelled, cursor="c2")
    for canonical in (True, False):
        read = page_of(body, canonical)
        assert [e.wire for e in read.items] == [other, spelled] and read.next_cursor == "c2"
        assert read == page_of(body.decode(), canonical)
    assert [e.created_at for e in page_of(body, True).items] == [1_767_225_600_000_000, 1_767_225_600_000_001]


@pytest.mark.parametrize(
    "created",
    [
        "2026-02-30T00:00:00.000000Z",
        "2026-13-01T00:00:00.000000Z",
        "٢٠٢٦-01-01T00:00:00.000000Z",
        "2026-01-01T24:00:00.000000Z",
    ],
    ids=["february-30", "month-13", "arabic-digits", "hour-24"],
)
@pytest.mark.parametrize("kind", ["bytes", "text"])
def test_a_trusted_page_with_a_time_that_does_not_exist_keeps_it_as_text(created: str, kind: str) -> None:
    # A server that says its page is canonical is trusted for its items' text, not for their times: a
    # time in the canonical shape that names no instant is read as text (created_at 0), never raised.
    bad = {**ITEM, "atom_id": "00000000-0000-4000-8000-000000000002", "created_at": created}
    body = json.dumps({"items": [ITEM, bad], "next_cursor": None}, separators=(",", ":"), ensure_ascii=False)
    entries = page_of(_as(kind, body), canonical=True).items
    assert [e.atom_id for e in entries] == [ITEM["atom_id"], bad["atom_id"]]
    assert entries[0].created_at == 1_767_225_600_000_001 and entries[1].created_at == 0
    assert json.loads(entries[1].wire)["created_at"] == created


def test_a_key_the_item_does_not_have_or_a_field_of_another_type_is_written_anew() -> None:
    # Only docs/server.md's fields, each of its type, are printed as they came; anything else is the item
    # read by the standard library and written as a RecentItem (what the hosted service's other shapes get).
    for odd, fixed in [
        ({**ITEM, "relevance": 0.5}, ITEM),
        ({**ITEM, "content": 7}, {**ITEM, "content": "7"}),
        ({**ITEM, "concepts": "ci"}, {**ITEM, "concepts": ["c", "i"]}),
        ({**ITEM, "concepts": 5}, {**ITEM, "concepts": ["5"]}),  # not a list: one concept, never a traceback
        ({**ITEM, "provenance": None}, ITEM),
        ({**ITEM, "supersedes": []}, ITEM),
        (
            {**ITEM, "provenance": {"principal": "p", "weight": 1.0}},
            {**ITEM, "provenance": {"principal": "p", "weight": 1.0}},
        ),
    ]:
        body = _page(json.dumps(odd, separators=(",", ":")))
        for canonical in (True, False):
            assert [e.wire for e in page_of(body, canonical).items] == [json.dumps(fixed, separators=(",", ":"))]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (_page("[1]"), "not an object"),
        (_page('{"content":"no id"}'), "without an atom_id"),
        (_page(COMPACT).replace(b'"x"', b'"\xff"'), "UTF-8"),
        (_page(COMPACT[:-1] + ',"provenance":{"weight":NaN}}'), "not JSON"),
        (_page("[" * 100_000 + "]" * 100_000), "not JSON"),
        (b'{"items":[' + COMPACT.encode() + b"]", "not JSON"),
        (b'{"items":' + COMPACT.encode() + b"}", "without an items list"),
        (b"[]", "without an items list"),
        (_page('"\\ud800"'), "not JSON"),
    ],
    ids=[
        "a-list",
        "no-atom-id",
        "not-utf8",
        "nan",
        "nested",
        "cut-short",
        "items-not-a-list",
        "not-a-page",
        "surrogate",
    ],
)
@pytest.mark.parametrize("canonical", [True, False])
def test_a_malformed_or_hostile_item_is_refused_never_printed(body: bytes, said: str, canonical: bool) -> None:
    with pytest.raises(Unavailable) as refused:
        page_of(body, canonical)
    assert said in refused.value.message


def test_a_line_break_between_the_tokens_of_an_item_is_never_printed() -> None:
    # NDJSON's framing: an item's text printed as it came must be one line, whatever the endpoint declares.
    for spaced in (COMPACT.replace(',"content"', ',\n"content"'), COMPACT.replace(',"domain"', ',\r"domain"')):
        for canonical in (True, False):
            (entry,) = page_of(_page(spaced), canonical).items
            assert entry.wire == COMPACT
    # A line of the stream (no `\n` in it: the reader cut there) is still searched for a `\r`.
    read = read_page(_page(COMPACT.replace(',"domain"', ',\r"domain"'), COMPACT), True, line=True)
    assert [e.wire for e in read.items] == [COMPACT, COMPACT]


_CANONICAL_TIMES = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)).map(
    lambda d: d.isoformat(timespec="microseconds") + "Z"
)
_TIMES = st.one_of(
    _CANONICAL_TIMES,
    st.sampled_from(["2026-02-30T10:00:00.000000Z", "2026-01-01T24:00:00.000000Z", "2026-01-01T10:00:00Z", ""]),
    st.text(alphabet="0123456789٣-T:.Z", min_size=27, max_size=27),
    st.integers(),
    st.none(),
)
_ATOMS = st.one_of(st.text(min_size=0, max_size=8), st.integers(), st.none())
_TEXT = st.text(max_size=12)
_VALUES = st.one_of(_TEXT, st.integers(), st.none(), st.booleans(), st.lists(_TEXT, max_size=2))
# Extras an item may carry: fields of docs/server.md with any value, or another field.
_EXTRA = st.dictionaries(
    st.sampled_from(["provenance", "supersedes", "superseded_by", "relevance", "id", "content", "concepts"]),
    st.one_of(_VALUES, st.dictionaries(st.sampled_from(["principal", "agent", "is_external", "x"]), _VALUES)),
    max_size=2,
)


@st.composite
def _items(draw: st.DrawFn) -> str:
    """One item's text: mostly a RecentItem as mnemo serve spells it, else another spelling, shape or type."""
    item: dict[str, Any] = {
        "atom_id": draw(st.one_of(st.text(min_size=1, max_size=8), _ATOMS)),
        "content": draw(_TEXT),
        "domain": draw(_TEXT),
        "created_at": draw(st.one_of(_CANONICAL_TIMES, _CANONICAL_TIMES, _TIMES)),
        "concepts": draw(st.lists(_TEXT, max_size=3)),
    }
    if draw(st.booleans()):
        item.update(draw(_EXTRA))
    if draw(st.integers(0, 5)) == 0:
        order = draw(st.permutations(list(item)))
        item = {k: item[k] for k in order}
    separators = draw(st.sampled_from([(",", ":"), (",", ":"), (", ", ": ")]))
    text = json.dumps(item, separators=separators, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 7)) == 0:
        text = text.replace(",", ",\n", 1)
    return text


@given(st.lists(_items(), max_size=10), st.one_of(st.none(), st.text(max_size=4)))
def test_the_whole_page_read_is_the_item_by_item_read(texts: list[str], cursor: str | None) -> None:
    # The whole-page reading of a trusted page (`_framed`) is a shortcut: whatever its items, it gives what
    # reading each item on its own gives (`_one`), or the page is read item by item; a refusal stays a refusal.
    # Read as its items' texts (`TextPage`), what it prints is those entries' texts, a line each.
    body = _page(*texts, cursor=cursor)
    read = _read(body)
    assert read == _read_alone(body)
    if read is Unavailable:
        return
    assert isinstance(read, Page)
    whole = read_page(body, True)
    if isinstance(whole, TextPage):
        assert whole.ndjson() == "".join(e.wire + "\n" for e in read.items).encode()
        assert whole.joined() == ",".join(e.wire for e in read.items).encode()
        assert (whole.ids, whole.next_cursor, len(whole)) == (
            [e.atom_id for e in read.items],
            read.next_cursor,
            len(texts),
        )
    for entry, text in zip(read.items, texts, strict=True):
        # What is printed is one line, and says the id and the time the walk checked.
        assert "\n" not in entry.wire and "\r" not in entry.wire
        printed = json.loads(entry.wire)
        assert printed["atom_id"] == entry.atom_id
        if entry.created_at:
            assert timefmt.parse_iso(printed["created_at"], field="created_at") == entry.created_at
        if entry.wire != text:  # written anew: as the standard library reads the item it came as
            assert list(printed)[:5] == ["atom_id", "content", "domain", "created_at", "concepts"]


@pytest.mark.parametrize(
    "keys",
    [
        ("atom_id", "content", "domain", "created_at", "concepts", "provenance", "supersedes", "superseded_by"),
        ("atom_id", "content", "domain", "created_at", "concepts", "supersedes"),
        ("atom_id", "content", "domain", "created_at", "concepts", "superseded_by", "supersedes"),
        ("atom_id", "content", "domain", "created_at", "provenance", "concepts"),
        ("atom_id", "domain", "content", "created_at", "concepts"),
    ],
)
def test_an_item_keeps_its_text_only_with_its_fields_in_wire_order(keys: tuple[str, ...]) -> None:
    # From an endpoint that does not declare its texts canonical (the hosted service), an item is printed as it
    # came only with docs/server.md's field order, else written in it; `mnemo serve`'s texts are its stored ones.
    full = {**ITEM, "provenance": {"principal": "p"}, "supersedes": ["a"], "superseded_by": "b"}
    text = json.dumps({k: full[k] for k in keys}, separators=(",", ":"))
    in_order = list(keys) == [k for k in full if k in keys]
    (entry,) = page_of(_page(COMPACT.replace("x", "y"), text), False).items[1:]
    assert (entry.wire == text) is in_order
    assert list(json.loads(entry.wire)) == [k for k in full if k in keys]
    (trusted,) = page_of(_page(COMPACT.replace("x", "y"), text), True).items[1:]
    assert trusted.wire == text


def test_a_key_spelled_with_escapes_counts_where_it_stands() -> None:
    # `pr\u006fvenance` is `provenance` to every JSON reader, so it is second here: out of docs/server.md's order.
    text = '{"atom_id":"00000000-0000-4000-8000-000000000001","pr\\u006fvenance":{}' + COMPACT[49:]
    assert list(json.loads(text))[:2] == ["atom_id", "provenance"]
    (entry,) = page_of(_page(text), False).items
    assert entry.wire == json.dumps({**ITEM, "provenance": {}}, separators=(",", ":"))


@given(st.lists(_items(), max_size=6))
def test_an_item_from_an_endpoint_not_declared_canonical_is_printed_in_wire_order(texts: list[str]) -> None:
    # The hosted dialect's items, whatever their spelling: each printed one is a RecentItem in docs/server.md's order.
    try:
        read = page_of(_page(*texts), False)
    except Unavailable:
        return
    for entry in read.items:
        keys = list(json.loads(entry.wire))
        assert keys[:5] == ["atom_id", "content", "domain", "created_at", "concepts"]
        assert tuple(keys) in remote_wire._KEY_ORDERS


def test_a_page_declared_canonical_is_read_as_its_items_texts_with_the_positions_the_walk_checks() -> None:
    newer = {**ITEM, "atom_id": "00000000-0000-4000-8000-00000000000b", "content": "café \u202e ✓"}
    newer_text = json.dumps(newer, separators=(",", ":"), ensure_ascii=False)
    older = COMPACT.replace('"created_at":"2026-01-01T00:00:00.000001Z"', '"created_at":"2025-12-31T23:59:59.999999Z"')
    body = _page(newer_text, COMPACT, older, cursor="c9")
    read = read_page(body, True)
    assert isinstance(read, TextPage)
    assert read.ndjson() == (newer_text + "\n" + COMPACT + "\n" + older + "\n").encode()
    assert read.ids == [newer["atom_id"], ITEM["atom_id"], ITEM["atom_id"]] and read.next_cursor == "c9"
    assert read.newest == 1_767_225_600_000_001 and read.last == (1_767_225_599_999_999, ITEM["atom_id"])
    assert list(read) == [newer_text, COMPACT, older]  # a chunk of wire texts
    assert read.items == page_of(body, True).items == page_of(body, False).items
    assert read.page() == Page(read.items, "c9")
    empty = read_page(_page(cursor=None), True)
    assert isinstance(empty, TextPage) and (empty.ndjson(), empty.newest, empty.last) == (b"", None, None)


def test_only_a_page_declared_canonical_whose_every_item_keeps_its_text_is_read_as_texts() -> None:
    assert isinstance(read_page(_page(COMPACT), False), Page)  # the hosted service's: item by item, in wire order
    odd = json.dumps({**ITEM, "relevance": 0.5}, separators=(",", ":"))
    mixed = read_page(_page(COMPACT, odd), True)
    assert isinstance(mixed, Page) and [e.wire for e in mixed.items] == [COMPACT, COMPACT]


@given(st.text(alphabet="0123456789", min_size=20, max_size=20))
def test_a_canonical_time_is_read_as_the_standard_library_reads_it(digits: str) -> None:
    # `_times` reads every time of a page in one msgspec call; on the canonical shape it must refuse what
    # `datetime.fromisoformat` refuses (a 13th month, a 30th of February, 24:00, a 60th second) and agree on the rest.
    text = f"{digits[:4]}-{digits[4:6]}-{digits[6:8]}T{digits[8:10]}:{digits[10:12]}:{digits[12:14]}.{digits[14:]}Z"
    try:
        expected = [datetime.fromisoformat(text)]
    except ValueError:
        expected = None
    assert remote_wire._times([text]) == expected


_OTHER = COMPACT.replace("0001", "0002")
_NESTED = COMPACT[:-1] + ',"provenance":{"principal":"p","is_external":false}}'


@pytest.mark.parametrize(
    "body",
    [
        _page(COMPACT.replace('"x"', '"},{\\"atom_id\\":\\"y\\"}"'), _OTHER),  # the boundary spelled in a string
        _page(COMPACT.replace('"x"', '"a},{"'), _OTHER),  # a string ending as a boundary begins
        _page(_NESTED, _OTHER, _NESTED),  # an object inside an item, then the next item
        _page(COMPACT, _OTHER.replace('{"atom_id":', '{ "atom_id":')),  # an item opening otherwise: item by item
        _page(COMPACT, " " + _OTHER),
        b'{"items":[ ' + COMPACT.encode() + b'],"next_cursor":null}',
        b'{"items":[' + COMPACT.encode() + b' ],"next_cursor":null}',
        b'{"items":[' + COMPACT.encode() + b'],"items":[' + _OTHER.encode() + b'],"next_cursor":null}',
        b'{"items":[' + COMPACT.encode() + b'],"next_cursor":null,"next_cursor":"c"}',
        b'{"items":[' + COMPACT.encode() + b'],"next_cursor":{"a":[1],"next_cursor":"c"}}',
        b'{"items":[' + COMPACT.encode() + b'],"more":[' + _OTHER.encode() + b'],"next_cursor":null}',
        _page(COMPACT, cursor="c\u00e9\\"),
    ],
    ids=[
        "boundary-in-a-string",
        "string-ending-in-a-brace",
        "nested-provenance",
        "spaced-key",
        "spaced-item",
        "space-after-bracket",
        "space-before-bracket",
        "items-twice",
        "cursor-twice",
        "cursor-an-object",
        "another-key",
        "escaped-cursor",
    ],
)
def test_a_page_laid_out_otherwise_reads_as_its_items_read_one_by_one(body: bytes) -> None:
    # The whole-page read of a line as `mnemo serve` lays it out (`_framed`) cuts the line where its items meet;
    # any other layout, a boundary spelled inside a string, a key twice, is read as each item read on its own.
    read = read_page(body, True)
    alone = _read_alone(body)
    assert isinstance(alone, Page)
    page = read if isinstance(read, Page) else read.page()
    assert page == alone
    if isinstance(read, TextPage):
        assert read.ndjson() == "".join(e.wire + "\n" for e in alone.items).encode()
