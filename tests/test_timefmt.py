"""Tests of mnemo's time values and the CLI time grammar (docs/cli.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_tui import timefmt
from mnemo_tui.errors import ValidationError

NOW = timefmt.from_datetime(datetime(2026, 11, 30, 7, 30, 15, 123456, tzinfo=UTC))
DAY = 86_400_000_000
TODAY = timefmt.from_datetime(datetime(2026, 11, 30, tzinfo=UTC))


def parse(text: str, **kw: object) -> int:
    return timefmt.parse_time(text, now=NOW, **kw)  # type: ignore[arg-type]


def test_wire_times_have_microseconds_and_z() -> None:
    assert timefmt.to_iso(NOW) == "2026-11-30T07:30:15.123456Z"
    assert timefmt.to_iso(0) == "1970-01-01T00:00:00.000000Z"
    assert timefmt.to_iso(TODAY) == "2026-11-30T00:00:00.000000Z"


def test_years_before_1000_keep_four_digits() -> None:
    assert timefmt.to_iso(timefmt.MIN_US) == "0001-01-01T00:00:00.000000Z"
    assert timefmt.to_iso(timefmt.MAX_US) == "9999-12-31T23:59:59.999999Z"


@given(st.integers(min_value=timefmt.MIN_US, max_value=timefmt.MAX_US))
def test_iso_round_trips_every_representable_instant(us: int) -> None:
    assert timefmt.parse_iso(timefmt.to_iso(us)) == us


@given(st.lists(st.integers(min_value=timefmt.MIN_US, max_value=timefmt.MAX_US), min_size=1, max_size=8), st.data())
def test_iso_spells_each_instant_as_datetime_does_whatever_came_before(
    instants: list[int], data: st.DataObject
) -> None:
    # The spelling of the last whole second is kept: instants in the same second, the one just before
    # and a far one in turn must each get their own.
    near = instants[0] + data.draw(st.integers(min_value=-1_000_001, max_value=1_000_001))
    for us in [*instants, min(max(near, timefmt.MIN_US), timefmt.MAX_US), instants[0]]:
        d = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
        assert timefmt.to_iso(us) == d.strftime("%Y-%m-%dT%H:%M:%S.%fZ").rjust(27, "0")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T07:00:00Z", TODAY + 7 * 3600 * 10**6),
        ("2026-11-30T07:00:00z", TODAY + 7 * 3600 * 10**6),
        ("2026-11-30T07:00:00+00:00", TODAY + 7 * 3600 * 10**6),
        ("2026-11-30T09:00:00+02:00", TODAY + 7 * 3600 * 10**6),
        ("2026-11-30T02:00:00-05:00", TODAY + 7 * 3600 * 10**6),
        ("2026-11-30T07:00:00", TODAY + 7 * 3600 * 10**6),  # naive = UTC
        ("2026-11-30 07:00:00", TODAY + 7 * 3600 * 10**6),
        ("2026-11-30T07:00", TODAY + 7 * 3600 * 10**6),
        ("2026-11-30T07:00:00.5Z", TODAY + 7 * 3600 * 10**6 + 500_000),
        ("2026-11-30T07:00:00.000001Z", TODAY + 7 * 3600 * 10**6 + 1),
        ("  2026-11-30T07:00:00Z  ", TODAY + 7 * 3600 * 10**6),
    ],
)
def test_iso_8601_with_or_without_offset(text: str, expected: int) -> None:
    assert parse(text) == expected
    assert parse(text, end_of_day=True) == expected  # only a date-only value moves to the day's end


def test_date_only_is_midnight_for_since_and_last_microsecond_for_until() -> None:
    assert parse("2026-11-30") == TODAY
    assert parse("2026-11-30", field="--until", end_of_day=True) == TODAY + DAY - 1
    assert timefmt.to_iso(parse("2026-11-30", end_of_day=True)) == "2026-11-30T23:59:59.999999Z"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("2h", 7200),
        ("3d", 3 * 86400),
        ("1w", 7 * 86400),
        ("1h30m", 5400),
        ("1d2h3m4s", 86400 + 7200 + 180 + 4),
        ("30m1h", 5400),
        ("0s", 0),
        ("2H", 7200),
        (" 15m ", 900),
        # As journalctl and git spell them (docs/cli.md's time grammar).
        ("2 days ago", 2 * 86400),
        ("1d ago", 86400),
        ("3 hours ago", 3 * 3600),
        ("-1h", 3600),
        ("-90s", 90),
        ("-5m", 300),
        ("15 m", 900),
        ("1h 30m", 5400),
        ("1 hour 30 minutes ago", 5400),
        ("1 week ago", 7 * 86400),
        ("45 secs ago", 45),
    ],
)
def test_relative_spans_count_back_from_the_clients_clock(text: str, seconds: int) -> None:
    assert parse(text) == NOW - seconds * 1_000_000


def test_now_today_and_yesterday() -> None:
    assert parse("now") == NOW
    assert parse("NOW") == NOW
    assert parse("today") == TODAY
    assert parse("yesterday") == TODAY - DAY
    # docs/cli.md's time grammar: today and yesterday are 00:00, for --until as well.
    assert parse("today", end_of_day=True) == TODAY


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "soon",
        "15",
        "5ms",
        "--5m",
        "ago",
        "1h ago ago",
        "3 fortnights ago",
        "1y",
        "m",
        "2026-13-01",
        "2026-02-30",
        "2026-11-30T25:00:00",
        "30/11/2026",
        "tomorrow",
        "2026-11-30T07:00:00+25:00",
        "99999999999999w",
    ],
)
def test_anything_else_is_refused_naming_the_value(text: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse(text, field="--since")
    assert "--since" in info.value.message
    if text.strip():
        assert repr(text) in info.value.message
    assert info.value.exit_code == 2


def test_out_of_range_instants_are_refused_not_crashing() -> None:
    with pytest.raises(ValidationError, match="out of range"):
        parse("999999999999w")
    with pytest.raises(ValidationError):
        parse("0001-01-01T00:00:00+01:00")


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
@pytest.mark.parametrize("text", ["0001-01-01", "0001-01-01T00:30", "9999-12-31T23:00", "9999-12-31"])
def test_local_times_at_the_ends_of_the_calendar_are_read_or_refused_as_out_of_range(
    monkeypatch: pytest.MonkeyPatch, zone: str, text: str
) -> None:
    # The local zone's conversion of a naive time near year 1 or 9999 raised ValueError (exit 5, "internal error").
    import time

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        for end_of_day in (False, True):
            try:
                got = parse(text, field="--since", end_of_day=end_of_day)
            except ValidationError as exc:
                assert "out of range" in exc.message and exc.exit_code == 2, exc.message
            else:
                assert timefmt.MIN_US <= got <= timefmt.MAX_US
    finally:
        monkeypatch.undo()
        time.tzset()


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 1, 1)))
def test_naive_and_z_spellings_agree(moment: datetime) -> None:
    naive = moment.isoformat()
    assert parse(naive) == parse(naive + "Z") == timefmt.from_datetime(moment.replace(tzinfo=UTC))


@given(
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=0, max_value=500),
    st.integers(min_value=0, max_value=500),
)
def test_compound_spans_add_up(d: int, h: int, m: int, s: int) -> None:
    text = f"{d}d{h}h{m}m{s}s"
    assert parse(text) == NOW - int(timedelta(days=d, hours=h, minutes=m, seconds=s).total_seconds()) * 1_000_000


def test_overlap_spans() -> None:
    assert timefmt.parse_overlap("0") == 0
    assert timefmt.parse_overlap("2s") == 2_000_000
    assert timefmt.parse_overlap("1m30s") == 90_000_000
    for bad in ("2", "-2s", "fast", ""):
        with pytest.raises(ValidationError, match="--overlap"):
            timefmt.parse_overlap(bad)


@pytest.mark.parametrize(
    ("age_seconds", "text"),
    [
        (0, "just now"),
        (5, "5s ago"),
        (59, "59s ago"),
        (60, "1m ago"),
        (3599, "59m ago"),
        (3600, "1h ago"),
        (86399, "23h ago"),
        (86400, "1d ago"),
        (59 * 86400, "59d ago"),
        (90 * 86400, "3mo ago"),
        (800 * 86400, "2y ago"),
        (-2, "just now"),
        (-3600, "in future"),
    ],
)
def test_relative_ages_read_naturally(age_seconds: int, text: str) -> None:
    assert timefmt.relative(NOW - age_seconds * 1_000_000, NOW) == text


@pytest.mark.parametrize("text", ["1M", "3M", "2 months ago", "1mo", "1M30m"])
def test_a_month_is_refused_saying_minutes_are_m(text: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse(text, field="--since")
    assert "minutes are `m`; months are not a span here" in info.value.message and info.value.exit_code == 2
