"""Fuzz the cursor decoder and the time parser: anything hostile is a validation error (exit 2), never a crash."""

from __future__ import annotations

import string
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mnemo_tui import timefmt
from mnemo_tui.cli import main
from mnemo_tui.engine import cursor as cursors
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import cursor_shaped
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest

ALPHABET = string.ascii_letters + string.digits + "-_"
SECRET = b"s" * 32
BOUND = cursors.binding("alice", RecentQuery())
MIN_US = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
MAX_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z

positions = st.tuples(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.uuids().map(str))
hostile_text = st.one_of(
    st.text(max_size=600),
    st.text(alphabet=ALPHABET + "=", min_size=1, max_size=600),
    st.binary(max_size=80).map(lambda b: b.decode("latin-1")),
)


# -- the cursor decoder ---------------------------------------------------------------------


@given(position=positions)
def test_a_cursor_round_trips_its_position(position: tuple[int, str]) -> None:
    text = cursors.encode(SECRET, BOUND, *position)
    assert cursors.decode(SECRET, BOUND, text) == position
    assert len(text) <= 512 and set(text) <= set(ALPHABET)


@given(text=hostile_text)
def test_any_string_that_was_not_issued_is_a_validation_error(text: str) -> None:
    with pytest.raises(ValidationError):
        cursors.decode(SECRET, BOUND, text)


@given(text=st.one_of(hostile_text, st.text(alphabet=ALPHABET + "=\u00e9+/. \n\x00\ud800", max_size=520)))
@example(text="")
@example(text="A" * 512)
@example(text="A" * 513)
@example(text="\ud800")
@example(text="AB\u00e9")
def test_a_cursor_has_a_cursors_shape_when_it_is_1_to_512_characters_of_the_url_safe_alphabet(text: str) -> None:
    # The shape every backend checks before a cursor is sent or decoded (RecentQuery.validated), by its definition.
    assert cursor_shaped(text) == (0 < len(text) <= 512 and set(text) <= set(ALPHABET + "="))


@given(position=positions, data=st.data())
def test_every_edit_of_a_real_cursor_is_refused(position: tuple[int, str], data: st.DataObject) -> None:
    text = cursors.encode(SECRET, BOUND, *position)
    i = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    edit = data.draw(st.sampled_from(["replace", "delete", "insert", "append", "swap"]))
    ch = data.draw(st.sampled_from(ALPHABET))
    if edit == "replace":
        forged = text[:i] + ch + text[i + 1 :]
    elif edit == "delete":
        forged = text[:i] + text[i + 1 :]
    elif edit == "insert":
        forged = text[:i] + ch + text[i:]
    elif edit == "append":
        forged = text + ch
    else:
        j = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
        chars = list(text)
        chars[i], chars[j] = chars[j], chars[i]
        forged = "".join(chars)
    if forged == text:
        return
    with pytest.raises(ValidationError):
        cursors.decode(SECRET, BOUND, forged)


def test_every_single_character_substitution_of_a_cursor_is_refused() -> None:
    """Exhaustive over one issued cursor: every character of the URL-safe alphabet in every place (upper-case
    hex digits, which `bytes.fromhex` reads, included). Version 1: tests/engine/test_cursor_format.py."""
    text = cursors.encode(SECRET, BOUND, 1_796_000_000_000_000, str(uuid.uuid4()))
    refused = 0
    for i in range(len(text)):
        for ch in ALPHABET:
            if ch == text[i]:
                continue
            with pytest.raises(ValidationError):
                cursors.decode(SECRET, BOUND, text[:i] + ch + text[i + 1 :])
            refused += 1
    assert refused == len(text) * (len(ALPHABET) - 1)


@pytest.fixture
def fed_store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "fuzz.db")
    for i in range(12):
        store.write("alice", WriteRequest(content=f"entry {i}", domain="a" if i % 2 else "b"))
    yield store
    store.close()


@settings(max_examples=60)
@given(text=hostile_text)
def test_the_store_refuses_any_fuzzed_cursor_and_never_degrades_to_a_first_page(fed_store: Store, text: str) -> None:
    with pytest.raises(ValidationError):
        fed_store.recent("alice", RecentQuery(limit=3, cursor=text))


def test_a_cursor_is_refused_by_another_scope_filter_reader_or_store(fed_store: Store, tmp_path: Path) -> None:
    page = fed_store.recent("alice", RecentQuery(limit=3, scope="a"))
    assert page.next_cursor is not None
    cursor = page.next_cursor
    for other in (
        RecentQuery(limit=3, cursor=cursor),
        RecentQuery(limit=3, cursor=cursor, scope="b"),
        RecentQuery(limit=3, cursor=cursor, scope="a", since=0),
        RecentQuery(limit=3, cursor=cursor, scope="a", until=timefmt.now_us()),
        RecentQuery(limit=3, cursor=cursor, scope="a", exclude_author="bob"),
        RecentQuery(limit=3, cursor=cursor, scope="a", include_history=True),
    ):
        with pytest.raises(ValidationError):
            fed_store.recent("alice", other)
    with pytest.raises(ValidationError):
        fed_store.recent("bob", RecentQuery(limit=3, cursor=cursor, scope="a"))
    elsewhere = Store(tmp_path / "other.db")
    try:
        with pytest.raises(ValidationError):
            elsewhere.recent("alice", RecentQuery(limit=3, cursor=cursor, scope="a"))
    finally:
        elsewhere.close()
    # The limit is not part of the binding: the same walk may change its page size.
    assert fed_store.recent("alice", RecentQuery(limit=5, cursor=cursor, scope="a")).items


# -- the time parser ------------------------------------------------------------------------

time_words = st.sampled_from(["now", "today", "yesterday", "Z", "T", ":", "-", "+", "w", "d", "h", "m", "s", " ", "."])
time_like = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(time_words, st.integers(min_value=0, max_value=10**20).map(str)), max_size=8).map("".join),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(lambda d: d.isoformat()),
    st.integers(min_value=0, max_value=10**15).map(lambda n: f"{n}w"),
)


@given(text=time_like, end_of_day=st.booleans())
def test_the_time_parser_answers_an_instant_in_range_or_a_validation_error(text: str, end_of_day: bool) -> None:
    try:
        value = timefmt.parse_time(text, field="--since", end_of_day=end_of_day)
    except ValidationError as exc:
        assert "--since" in exc.message
        return
    assert MIN_US <= value <= MAX_US
    timefmt.to_iso(value)  # every accepted instant can be shown


@given(
    moment=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    offset_minutes=st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59),
    naive=st.booleans(),
)
def test_iso_instants_parse_to_the_same_microsecond_with_any_offset(
    moment: datetime, offset_minutes: int, naive: bool
) -> None:
    aware = moment if naive else moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    expected = timefmt.from_datetime(aware if not naive else moment.replace(tzinfo=UTC))
    assert timefmt.parse_time(aware.isoformat()) == expected
    assert timefmt.parse_iso(timefmt.to_iso(expected)) == expected


@given(
    parts=st.lists(st.tuples(st.integers(min_value=0, max_value=999), st.sampled_from("wdhms")), min_size=1, max_size=5)
)
def test_relative_spans_count_back_from_now(parts: list[tuple[int, str]]) -> None:
    units = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
    text = "".join(f"{n}{u}" for n, u in parts)
    now = 1_796_000_000_000_000
    plain = [u for _n, u in parts] == sorted({u for _n, u in parts}, key="wdhms".index)
    try:
        value = timefmt.parse_time(text, now=now)
    except ValidationError:
        # A grammar may refuse repeated or out-of-order units (it must say so, not guess); never a plain span.
        assert not plain, f"{text!r} has each unit once, largest first: it must parse"
        return
    assert value == now - sum(n * units[u] for n, u in parts) * 1_000_000


@pytest.mark.parametrize(
    ("span", "seconds"),
    [("90s", 90), ("1h30m", 5_400), ("1w", 604_800), ("2d3h4m5s", 183_845), ("0s", 0), ("36h", 129_600)],
)
def test_these_relative_spans_parse(span: str, seconds: int) -> None:
    now = 1_796_000_000_000_000
    assert timefmt.parse_time(span, now=now) == now - seconds * 1_000_000


# -- the same through the CLI (in-process: one line, exit 2, no traceback) -----------------


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@settings(max_examples=25)
@given(text=time_like.filter(lambda t: t and not t.startswith("-")))
def test_mnemo_recent_answers_any_since_with_0_or_exit_2(capsys: pytest.CaptureFixture[str], text: str) -> None:
    code, _, err = _run(capsys, "recent", "--since", text, "--format", "json")
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) <= 2


@settings(max_examples=25)
@given(text=st.text(alphabet=ALPHABET + "=", min_size=1, max_size=600).filter(lambda t: not t.startswith("-")))
def test_mnemo_recent_refuses_any_forged_cursor_with_exit_2(capsys: pytest.CaptureFixture[str], text: str) -> None:
    code, out, err = _run(capsys, "recent", "--cursor", text, "--format", "json")
    assert code == 2, (out, err)
    assert "Traceback" not in err and out == ""
