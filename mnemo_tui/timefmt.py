"""Provides mnemo's time values: integer microseconds since the epoch (UTC), their wire form and the CLI grammar."""

from __future__ import annotations

import re
import time
from datetime import UTC, date, datetime, timedelta

from mnemo_tui.errors import ValidationError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# A span is parts like `2h`, `30m` or `3 hours`, run together (`1h30m`) or spaced; `-1h` and `2 days ago`
# are how journalctl and git spell the same span before now.
_SPAN = re.compile(r"^(?: *\d{1,12} *[a-z]+)+\Z")
_SPAN_PART = re.compile(r"(\d{1,12}) *([a-z]+)")
_UNIT_WORDS = {
    **{w: "s" for w in ("s", "sec", "secs", "second", "seconds")},
    **{w: "m" for w in ("m", "min", "mins", "minute", "minutes")},
    **{w: "h" for w in ("h", "hr", "hrs", "hour", "hours")},
    **{w: "d" for w in ("d", "day", "days")},
    **{w: "w" for w in ("w", "week", "weeks")},
}
# `1M` read as a minute (after lower-casing) would be a silent surprise to whoever meant a month.
_MONTHS_MEANT = re.compile(r"\d\s*(?:M(?![A-Za-z])|(?i:mo|months?)\b)")
# The instants a datetime can show: 0001-01-01 and 9999-12-31 (UTC), in microseconds since the epoch.
MIN_US = -62_135_596_800_000_000
MAX_US = 253_402_300_799_999_999
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?\Z")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def now_us() -> int:
    """The current instant in integer microseconds since the epoch."""
    return time.time_ns() // 1000


def to_iso(us: int) -> str:
    """Format microseconds as UTC ISO-8601 with microseconds and `Z` (`2026-11-30T07:00:00.123456Z`)."""
    second, micro = divmod(us, 1_000_000)
    return f"{_iso_second(second)}.{micro:06d}Z"


_last_second: tuple[int, str] = (0, "1970-01-01T00:00:00")


def _iso_second(second: int) -> str:
    """The spelling of a whole second (`2026-11-30T07:00:00`), the last one kept: writes come in runs of one second."""
    global _last_second
    last = _last_second  # one read: another thread may replace it meanwhile
    if last[0] == second:
        return last[1]
    d = EPOCH + timedelta(seconds=second)
    # Spelled out rather than strftime, whose %Y drops the leading zeros of years before 1000.
    text = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
    _last_second = (second, text)
    return text


def from_datetime(value: datetime) -> int:
    """Microseconds since the epoch of an aware or naive (= UTC) datetime."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _from_wall(value: datetime, utc: bool) -> int:
    """Microseconds of a wall-clock reading: in UTC, or in the local zone (`TZ`) when not `utc`."""
    if value.tzinfo is None and utc:
        value = value.replace(tzinfo=UTC)
    elif value.tzinfo is None:
        try:
            value = value.astimezone()
        except ValueError as exc:  # near year 1 or 9999 the local zone's conversion leaves the calendar
            raise OverflowError(str(exc)) from None
    return from_datetime(value)


class _OutOfRange(ValidationError):
    """An instant written correctly but outside years 1 to 9999 (said so, not "not a time")."""


def wall(us: int, utc: bool = False) -> datetime:
    """The instant as an aware datetime on the local clock (`TZ`), or in UTC."""
    d = EPOCH + timedelta(microseconds=us)
    if utc:
        return d
    try:
        return d.astimezone()
    except (OverflowError, OSError, ValueError):
        return d  # an instant the platform's local-time functions cannot place (year 1, 9999)


def zone_name(utc: bool = False) -> str:
    """The name tables give the clock they show: `UTC`, or the local zone's abbreviation (`CET`, `+0530`)."""
    if utc:
        return "UTC"
    return datetime.now().astimezone().tzname() or "local"


def when(us: int, now: int, utc: bool = False) -> str:
    """A table's time of an entry: its age while that says enough (under a day), else its date.

    `5m ago` and `3h ago` within a day; `Nov 28 14:03` within the year; `2025-11-28` before.
    """
    if -5_000_000 < now - us < 86_400_000_000:
        return relative(us, now)
    return dated(us, now, utc)


def dated(us: int, now: int, utc: bool = False) -> str:
    """An entry's date whatever its age (`recent --follow`): `Nov 28 14:03` within the year of `now`, else `2025-11-28`."""
    d, today = wall(us, utc), wall(now, utc)
    if d.year == today.year:
        return f"{_MONTHS[d.month - 1]} {d.day:2d} {d.hour:02d}:{d.minute:02d}"
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def shown(us: int, utc: bool = False) -> str:
    """An instant for a person: `2026-11-30 08:00:00 CET` on the local clock, or `... UTC`."""
    d = wall(us, utc)
    zone = "UTC" if utc else (d.tzname() or "local")
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d} {zone}"


def iso_offset(us: int, utc: bool = False) -> str:
    """An instant as ISO-8601 with its offset, on the local clock or UTC (`2026-11-30T08:00:00.000000+01:00`).

    A UTC reading (`utc`, or a local zone at offset 0) is the wire's own spelling, `Z`, never `+00:00`: the
    same instant reads the same in a pipe as in JSON (docs/cli.md, "Times").
    """
    if utc:
        return to_iso(us)
    d = wall(us)
    if not d.utcoffset():
        return to_iso(us)
    return d.isoformat(timespec="microseconds")


def parse_iso(text: str, *, field: str = "time", utc: bool = True) -> int:
    """Parse an ISO-8601 instant into microseconds (a naive one is UTC, or local time when not `utc`).

    Raises:
        ValidationError: when the text is not an ISO-8601 instant.
    """
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(raw)
    except (ValueError, OverflowError):
        raise ValidationError(f"{field}: {text!r} is not an ISO-8601 instant") from None
    try:
        return _from_wall(parsed, utc)
    except (OverflowError, OSError):
        raise _OutOfRange(f"{field}: {text!r} is out of range (years 1 to 9999)") from None


def parse_span(text: str, field: str = "span") -> int | None:
    """Microseconds of a relative span like `90s`, `2h`, `1h30m`, `1w`; None if it is not one.

    Units are `w`, `d`, `h`, `m` (minutes) and `s`, or their English words (`3 hours`, `2 days`),
    combined in any order (`1h30m`, `30m1h`).

    Raises:
        ValidationError: a month (`1M`, `2 months`): minutes are `m`, and months are not a span here.
    """
    stripped = text.strip()
    if _MONTHS_MEANT.search(stripped):
        raise ValidationError(f"{field}: {text!r}: minutes are `m`; months are not a span here")
    value = stripped.lower()
    if not _SPAN.match(value):
        return None
    parts = _SPAN_PART.findall(value)
    if any(unit not in _UNIT_WORDS for _n, unit in parts):
        return None
    span = sum(int(n) * _UNITS[_UNIT_WORDS[unit]] for n, unit in parts) * 1_000_000
    if span > MAX_US - MIN_US:
        raise ValidationError(
            f"{field}: {text!r} is out of range: longer than any span between two instants (years 1 to 9999)"
        )
    return span


def _before_now(text: str) -> str:
    """A span as a time before now: `-1h` and `2 days ago` (journalctl's and git's spellings) are `1h`, `2 days`."""
    value = text.strip()
    if value.startswith("-"):
        return value[1:]
    if value.lower().endswith(" ago"):
        return value[: -len(" ago")]
    return value


def parse_time(
    text: str, *, field: str = "--since", end_of_day: bool = False, now: int | None = None, utc: bool = False
) -> int:
    """Parse the CLI time grammar of docs/cli.md into microseconds.

    Wall-clock values are read on the local clock (`TZ`), or in UTC with `utc`: a naive ISO-8601
    value, a date (its 00:00, or its last microsecond when `end_of_day`), `today`, `yesterday` and
    a bare `HH:MM[:SS]` (that time today). An
    offset or `Z` says its own zone; a span before now (`90s`, `1h30m`, `1w`) and `now` need none.

    Args:
        text: the value.
        field: the option name, used in the error message.
        end_of_day: read a date-only value as its last microsecond (for `--until`).
        now: the client's clock in microseconds (tests inject it).
        utc: read wall-clock values in UTC (`--utc`, `utc = true`).

    Raises:
        ValidationError: naming the value when it matches none of the forms.
    """
    try:
        result = _parse_time(text, field, end_of_day, now_us() if now is None else now, utc)
    except (OverflowError, OSError):
        raise ValidationError(f"{field}: {text!r} is out of range (years 1 to 9999)") from None
    if not MIN_US <= result <= MAX_US:
        raise ValidationError(f"{field}: {text!r} is out of range (years 1 to 9999)")
    return result


def _parse_time(text: str, field: str, end_of_day: bool, current: int, utc: bool) -> int:
    value = text.strip().lower()
    if not value:
        raise ValidationError(f"{field}: empty time value")
    if value == "now":
        return current
    if value in ("today", "yesterday"):
        day = wall(current, utc).date()
        if value == "yesterday":
            day -= timedelta(days=1)
        return _day_start(day, utc)
    clock = _CLOCK.match(value)
    if clock:
        today = wall(current, utc)
        hour, minute, second = int(clock[1]), int(clock[2]), int(clock[3] or 0)
        return _from_wall(datetime(today.year, today.month, today.day, hour, minute, second), utc)
    span = parse_span(_before_now(text), field)
    if span is not None:
        return current - span
    if _DATE_ONLY.match(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise ValidationError(f"{field}: {text!r} is not a valid date") from None
        start = _day_start(day, utc)
        return _day_start(day + timedelta(days=1), utc) - 1 if end_of_day else start
    try:
        return parse_iso(text, field=field, utc=utc)
    except _OutOfRange:
        raise
    except ValidationError:
        raise ValidationError(
            f"{field}: {text!r} is not a time (use ISO-8601, a date, HH:MM, a span such as 15m, 1h30m or "
            "2 days ago, now, today or yesterday)"
        ) from None


def _day_start(day: date, utc: bool = True) -> int:
    """The first microsecond of a day, in UTC or on the local clock."""
    return _from_wall(datetime(day.year, day.month, day.day), utc)


def parse_overlap(text: str) -> int:
    """Parse an `--overlap` span (`2s`, `1m`, `1m30s`; `0` means none) into microseconds.

    Raises:
        ValidationError: naming the value when it is not a span.
    """
    value = text.strip().lower()
    if value in ("0", "0s"):
        return 0
    span = parse_span(text, "--overlap")
    if span is None:
        raise ValidationError(f"--overlap: {text!r} is not a span (use e.g. 2s, 1m, or 0)")
    return span


def relative(us: int, now: int | None = None) -> str:
    """A short human age such as `5s ago`, `3m ago`, `2h ago`, `4d ago` (`just now` within a second)."""
    current = now_us() if now is None else now
    delta = (current - us) // 1_000_000
    if delta < 1:
        return "just now" if delta > -5 else "in future"
    if delta < 60:
        return f"{delta}s ago"
    if delta < 3600:
        return f"{delta // 60}m ago"
    if delta < 86400:
        return f"{delta // 3600}h ago"
    if delta < 86400 * 60:
        return f"{delta // 86400}d ago"
    if delta < 86400 * 730:
        return f"{delta // (86400 * 30)}mo ago"
    return f"{delta // (86400 * 365)}y ago"
