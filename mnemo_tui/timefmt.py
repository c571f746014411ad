"""Provides mnemo's time values: integer microseconds since the epoch (UTC), their wire form and the CLI grammar."""

from __future__ import annotations

import re
import time
from datetime import UTC, date, datetime, timedelta

from mnemo_tui.errors import ValidationError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SPAN = re.compile(r"^(?:\d{1,12}[wdhms])+$")
_SPAN_PART = re.compile(r"(\d+)([wdhms])")
# The instants a datetime can show: 0001-01-01 and 9999-12-31 (UTC), in microseconds since the epoch.
MIN_US = -62_135_596_800_000_000
MAX_US = 253_402_300_799_999_999
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def now_us() -> int:
    """The current instant in integer microseconds since the epoch."""
    return time.time_ns() // 1000


def to_iso(us: int) -> str:
    """Format microseconds as UTC ISO-8601 with microseconds and `Z` (`2026-11-30T07:00:00.123456Z`)."""
    d = EPOCH + timedelta(microseconds=us)
    # Spelled out rather than strftime, whose %Y drops the leading zeros of years before 1000.
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}.{d.microsecond:06d}Z"


def from_datetime(value: datetime) -> int:
    """Microseconds since the epoch of an aware or naive (= UTC) datetime."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def parse_iso(text: str, *, field: str = "time") -> int:
    """Parse an ISO-8601 instant (offset optional, naive = UTC) into microseconds.

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
        return from_datetime(parsed)
    except OverflowError:
        raise ValidationError(f"{field}: {text!r} is out of range") from None


def parse_span(text: str, field: str = "span") -> int | None:
    """Microseconds of a relative span like `90s`, `2h`, `1h30m`, `1w`; None if it is not one.

    Units are `w`, `d`, `h`, `m` (minutes) and `s`, combined in any order (`1h30m`, `30m1h`).
    """
    value = text.strip().lower()
    if not _SPAN.match(value):
        return None
    span = sum(int(n) * _UNITS[unit] for n, unit in _SPAN_PART.findall(value)) * 1_000_000
    if span > MAX_US - MIN_US:
        raise ValidationError(
            f"{field}: {text!r} is out of range: longer than any span between two instants (years 1 to 9999)"
        )
    return span


def parse_time(text: str, *, field: str = "--since", end_of_day: bool = False, now: int | None = None) -> int:
    """Parse the CLI time grammar of CLI.md into microseconds.

    Args:
        text: ISO-8601 (naive = UTC), a date (00:00 UTC, or its last microsecond when
            `end_of_day`), a span before now (`90s`, `1h30m`, `1w`), `now`, `today`, `yesterday`.
        field: the option name, used in the error message.
        end_of_day: read a date-only value as its last microsecond (for `--until`).
        now: the client's clock in microseconds (tests inject it).

    Raises:
        ValidationError: naming the value when it matches none of the forms.
    """
    result = _parse_time(text, field, end_of_day, now_us() if now is None else now)
    if not MIN_US <= result <= MAX_US:
        raise ValidationError(f"{field}: {text!r} is out of range (years 1 to 9999)")
    return result


def _parse_time(text: str, field: str, end_of_day: bool, current: int) -> int:
    value = text.strip().lower()
    if not value:
        raise ValidationError(f"{field}: empty time value")
    if value == "now":
        return current
    if value in ("today", "yesterday"):
        day = (EPOCH + timedelta(microseconds=current)).date()
        if value == "yesterday":
            day -= timedelta(days=1)
        return _day_start(day)
    span = parse_span(value, field)
    if span is not None:
        return current - span
    if _DATE_ONLY.match(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise ValidationError(f"{field}: {text!r} is not a valid date") from None
        start = _day_start(day)
        return start + 86_400_000_000 - 1 if end_of_day else start
    try:
        return parse_iso(text, field=field)
    except ValidationError:
        raise ValidationError(
            f"{field}: {text!r} is not a time (use ISO-8601, a date, a span such as 15m or 1h30m, "
            "now, today or yesterday)"
        ) from None


def _day_start(day: date) -> int:
    return from_datetime(datetime(day.year, day.month, day.day, tzinfo=UTC))


def parse_overlap(text: str) -> int:
    """Parse an `--overlap` span (`2s`, `1m`, `1m30s`; `0` means none) into microseconds.

    Raises:
        ValidationError: naming the value when it is not a span.
    """
    value = text.strip().lower()
    if value in ("0", "0s"):
        return 0
    span = parse_span(value, "--overlap")
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
