"""Provides where a command's watermarks are kept (a server's consumers, or the local state database), `--start`,
and `watermark list` / `watermark prune` against an endpoint that keeps consumers (docs/consumers.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from mnemo_tui import sanitize, timefmt
from mnemo_tui.errors import ValidationError
from mnemo_tui.values.model import RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.backends import Backend
    from mnemo_tui.backends.remote_consumers import Position, ServerWatermarks
    from mnemo_tui.cli.context import Context
    from mnemo_tui.state.statedb import StateDB

IDLE_DAYS = 30  # a consumer untouched this long is idle (`watermark list --idle`, `watermark prune`)
_KEPT: WeakKeyDictionary[Context, StateDB | ServerWatermarks] = WeakKeyDictionary()


def watermarks(c: Context) -> StateDB | ServerWatermarks:
    """Where this command's watermarks are: an endpoint's consumers (found out on first use; an endpoint without
    them is said once and the state database used), else the state database.

    Raises:
        ValidationError: `MNEMO_WATERMARKS` is neither `server` nor `local`.
    """
    found = _KEPT.get(c)
    if found is None:
        found = c.state
        if c.settings.endpoint:
            from mnemo_tui.backends.remote_consumers import kept_by

            found = kept_by(c.backend, c.state, _hint)
        _KEPT[c] = found
    return found


def _hint(text: str) -> None:
    sys.stderr.write(sanitize.line(text) + "\n")


def start_point(
    backend: Backend, scope: str | None, text: str | None, *, utc: bool
) -> Callable[[int], tuple[int, tuple[str, ...]] | None] | None:
    """Where a consumer with no watermark begins (`catchup --start`), asked only when it has none, with the pass's
    overlap: None at the oldest entry (the default); `newest`: past the scope's newest entry now (the ids within
    the overlap below it held, as a pass's commit holds them); a TIME of docs/cli.md's grammar: at that instant. The
    value is checked at once.

    Raises:
        ValidationError: a value that is none of these.
    """
    if text is None or text == "oldest":
        return None
    if text == "newest":

        def newest(overlap: int) -> tuple[int, tuple[str, ...]] | None:
            page = backend.recent(RecentQuery(scope=scope, limit=1))
            if not page.items:
                return None  # an empty scope: everything written from now on is new
            top = page.items[0].created_at
            near = backend.recent(RecentQuery(scope=scope, since=top - overlap, limit=100)) if overlap else page
            return top, tuple(e.atom_id for e in near.items)

        return newest
    try:
        instant = timefmt.parse_time(text, field="--start", utc=utc)
    except ValidationError:
        raise ValidationError(
            f"--start must be oldest, newest or a time (ISO-8601, a date, 2h, yesterday...), not {sanitize.quoted(text)}"
        ) from None
    return lambda overlap: (instant, ())


def positions(c: Context) -> list[Position] | None:
    """Every position the endpoint keeps for the key's principal, with its lag; None where watermarks are local."""
    kept = watermarks(c)
    from mnemo_tui.backends.remote_consumers import ServerWatermarks

    return kept.positions() if isinstance(kept, ServerWatermarks) else None


def idle(found: list[Position], days: int) -> list[Position]:
    """The positions untouched for at least `days` days."""
    edge = timefmt.now_us() - days * 86_400 * 1_000_000
    return [p for p in found if p.mark.updated_at <= edge]


def lag_wire(p: Position) -> dict[str, object]:
    """A watermark object of docs/cli.md with the lag `watermark list` adds against an endpoint."""
    from mnemo_tui.state.statedb import watermark_wire

    wire = watermark_wire(p.mark) or {}
    return {**wire, "behind_entries": p.behind_entries, "behind_seconds": p.behind_seconds}


def lag_cells(p: Position) -> list[str]:
    """The table's lag columns: entries and a span (`?` for a room the principal left)."""
    if p.behind_entries is None:
        return ["?", "?"]
    seconds = round(p.behind_seconds or 0.0)
    hours, rest = divmod(seconds, 3600)
    return [str(p.behind_entries), (f"{hours}h" if hours else "") + f"{rest // 60}m{rest % 60:02d}s"]


def check_idle(days: int | None) -> int | None:
    """`--idle DAYS`: a whole number of days, at least 1.

    Raises:
        ValidationError: less than 1.
    """
    if days is not None and days < 1:
        raise ValidationError("--idle is a number of days, at least 1")
    return days


def list_positions(c: Context, name: str | None, fmt: str, idle_days: int | None) -> bool:
    """`watermark list` against an endpoint that keeps consumers: each position with its lag (`behind_entries`,
    `behind_seconds`); with `idle_days`, only those untouched that long. False where watermarks are local."""
    from mnemo_tui.catchup import empty_reports
    from mnemo_tui.cli import output
    from mnemo_tui.limits import room_of

    found = positions(c)
    if found is None:
        return False
    found = [p for p in found if name is None or p.mark.consumer == name]
    if idle_days is not None:
        found = idle(found, idle_days)
    rooms = empty_reports.room_names(c.backend) if fmt == "table" and any(room_of(p.mark.scope) for p in found) else {}
    whose = "" if name is None else f" of consumer {name!r}"
    quiet = "" if idle_days is None else f" untouched for {idle_days} days"
    output.listing(
        fmt,
        [lag_wire(p) for p in found],
        empty=f"No watermarks{whose}{quiet} on {c.backend.identity}. `mnemo catchup` sets one.",
        headers=["CONSUMER", "SCOPE", "WATERMARK", "BEHIND", "BEHIND BY", "UPDATED", "BY"],
        rows=[
            [
                p.mark.consumer,
                _label(p.mark.scope, rooms),
                "none" if p.mark.created_at is None else output.listed_time(p.mark.created_at, c.utc),
                *lag_cells(p),
                output.listed_time(p.mark.updated_at, c.utc, age=True),
                p.host or "-",
            ]
            for p in found
        ],
    )
    return True


def _label(scope: str | None, rooms: dict[str, str]) -> str:
    if scope is None:
        return "(own store)"
    named = rooms.get(scope)
    return scope if named is None else f"{scope} ({named})"


def prune(c: Context, idle_days: int, name: str | None, dry_run: bool) -> list[str]:
    """`watermark prune`: forget every consumer (of the endpoint, or of this backend in the state database) whose
    every watermark is untouched for `idle_days` days; returns their names (with `dry_run`, only names them)."""
    from mnemo_tui.backends.remote_consumers import ServerWatermarks
    from mnemo_tui.state.statedb import StateKey

    kept = watermarks(c)
    backend = c.backend
    found = kept.positions() if isinstance(kept, ServerWatermarks) else None
    if found is not None:
        marks = [(p.mark, p.mark.updated_at) for p in found]
    else:
        marks = [(w, w.updated_at) for w in c.state.list(backend.identity, backend.principal)]
    edge = timefmt.now_us() - idle_days * 86_400 * 1_000_000
    names = sorted({w.consumer for w, _ in marks if name is None or w.consumer == name})
    stale = [n for n in names if all(at <= edge for w, at in marks if w.consumer == n)]
    if dry_run:
        return stale
    for consumer in stale:
        if found is not None and isinstance(kept, ServerWatermarks):
            kept.consumers.delete(consumer)
        for w, _ in marks:
            if w.consumer == consumer:
                c.state.reset(StateKey.of(backend, consumer, w.scope))
    return stale
