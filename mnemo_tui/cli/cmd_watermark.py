"""Provides `mnemo watermark list|show|set|reset|prune`: a consumer's watermark per backend and scope."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui import sanitize, timefmt
from mnemo_tui.catchup import empty_reports
from mnemo_tui.cli import completion, consumers, output
from mnemo_tui.cli.commands import Scope, TableFormat, ctx_of, group
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.table import key_value_table
from mnemo_tui.limits import parse_scope, room_of
from mnemo_tui.state.statedb import StateKey, watermark_wire

if TYPE_CHECKING:
    from mnemo_tui.values.model import Watermark


watermark = group("watermark", "Inspect and manage watermarks per backend, consumer and scope.")


# The consumer whose watermark `watermark show`, `set` and `reset` handle.
Consumer = Annotated[
    str | None,
    typer.Option(
        "--consumer",
        "-c",
        metavar="NAME",
        help="Reader name (default: the configured one).",
        autocompletion=completion.consumers,
    ),
]


# Consumers untouched for this many days (`watermark list --idle`, `watermark prune`).
Idle = Annotated[int | None, typer.Option("--idle", metavar="DAYS", help="Only consumers untouched for DAYS days.")]


def _consumer(c: Context, consumer: str | None) -> str:
    return c.consumer(consumer)


def _scope(c: Context, scope: str | None) -> str | None:
    """A watermark command's scope, resolved as `catchup` resolves it (a room's name reads that room)."""
    from mnemo_tui.cli.feed import resolved_scope

    return resolved_scope(c, parse_scope(scope))


def _scope_label(scope: str | None, rooms: dict[str, str] | None = None) -> str:
    """A watermark's scope for a person: a room's address with its name beside it (the id alone says nothing)."""
    if scope is None:
        return "(own store)"
    name = (rooms or {}).get(scope)
    return f"{scope} ({name})" if name is not None else scope


def _room_names(c: Context, scope: str | None, fmt: str) -> dict[str, str]:
    """The rooms' names a table shows beside a room's address (none asked for otherwise)."""
    return empty_reports.room_names(c.backend) if fmt == "table" and room_of(scope) is not None else {}


def _scope_phrase(scope: str | None) -> str:
    return f"scope {scope}" if scope is not None else "your own store"


def _write_watermark(
    w: Watermark | None, fmt: str, *, scope: str | None, consumer: str, utc: bool, rooms: dict[str, str] | None = None
) -> None:

    if fmt == "json":
        sys.stdout.write(output.dumps(watermark_wire(w)) + "\n")
        return
    if w is None:
        sys.stdout.write(
            f"No watermark for consumer {consumer!r} on {_scope_phrase(scope)}: "
            "the next catchup reads the whole scope.\n"
        )
        return
    mark = (
        "none (reads the whole scope)"
        if w.created_at is None
        else f"{timefmt.shown(w.created_at, utc)} ({timefmt.to_iso(w.created_at)})"
    )
    key_value_table(
        sys.stdout,
        [
            ("scope", _scope_label(w.scope, rooms)),
            ("consumer", w.consumer),
            ("watermark", mark),
            ("entries at that instant", ", ".join(w.boundary_ids) or "none"),
            ("updated", f"{timefmt.shown(w.updated_at, utc)} ({timefmt.relative(w.updated_at)})"),
        ],
    )


@watermark.command("list", short_help="Every watermark of this backend and principal.")
def watermark_list(
    ctx: typer.Context,
    consumer: Annotated[
        str | None,
        typer.Option(
            "--consumer",
            "-c",
            metavar="NAME",
            help="Only this reader's watermarks (default: every consumer's).",
            autocompletion=completion.consumers,
        ),
    ] = None,
    idle: Idle = None,
    fmt: TableFormat = "table",
) -> None:
    """Every watermark of this backend and principal (--consumer: one reader's); against a server that keeps
    consumers, with how far each is behind (--idle: only those untouched that many days)."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    backend = c.backend
    name = None if consumer is None else c.consumer(consumer)
    if consumers.list_positions(c, name, fmt, consumers.check_idle(idle)):
        return
    marks = [w for w in c.state.list(backend.identity, backend.principal) if name is None or w.consumer == name]
    if idle is not None:
        marks = [w for w in marks if w.updated_at <= timefmt.now_us() - idle * 86_400_000_000]
    rooms = empty_reports.room_names(backend) if fmt == "table" and any(room_of(w.scope) for w in marks) else {}
    whose = "" if name is None else f" of consumer {name!r}"
    output.listing(
        fmt,
        [watermark_wire(w) for w in marks],
        empty=f"No watermarks{whose} yet for {backend.principal!r} on {backend.identity}. `mnemo catchup` sets one.",
        headers=["CONSUMER", "SCOPE", "WATERMARK", "ENTRIES AT IT", "UPDATED"],
        rows=[
            [
                w.consumer,
                _scope_label(w.scope, rooms),
                "none" if w.created_at is None else output.listed_time(w.created_at, c.utc),
                str(len(w.boundary_ids)),
                output.listed_time(w.updated_at, c.utc, age=True),
            ]
            for w in marks
        ],
    )


@watermark.command("show", short_help="One consumer's watermark for one scope.")
def watermark_show(
    ctx: typer.Context,
    scope: Scope = None,
    consumer: Consumer = None,
    fmt: TableFormat = "table",
) -> None:
    """One consumer's watermark for one scope (JSON null when it has none)."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    scope_value, name = _scope(c, scope), _consumer(c, consumer)
    mark = consumers.watermarks(c).load(StateKey.of(c.backend, name, scope_value))
    _write_watermark(mark, fmt, scope=scope_value, consumer=name, utc=c.utc, rooms=_room_names(c, scope_value, fmt))


@watermark.command("set", short_help="Set a watermark by hand (boundary ids emptied).")
def watermark_set(
    ctx: typer.Context,
    time: Annotated[str, typer.Argument(metavar="TIME", help="The new watermark (ISO-8601, a date, 2h, today...).")],
    scope: Scope = None,
    consumer: Consumer = None,
    fmt: TableFormat = "table",
) -> None:
    """Set a watermark by hand (boundary ids emptied): the next pass reads from that instant, inclusive."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    scope_value, name = _scope(c, scope), _consumer(c, consumer)
    instant = timefmt.parse_time(time, field="watermark set", utc=c.utc)
    mark = consumers.watermarks(c).commit(StateKey.of(c.backend, name, scope_value), instant, (), force=True)
    _write_watermark(mark, fmt, scope=scope_value, consumer=name, utc=c.utc, rooms=_room_names(c, scope_value, fmt))
    if instant > timefmt.now_us():
        output.hint(
            f"note: {timefmt.to_iso(instant)} is in the future: catchup will show nothing written before it "
            "(`mnemo watermark reset` undoes this)"
        )


@watermark.command("reset")
def watermark_reset(
    ctx: typer.Context,
    scope: Scope = None,
    consumer: Consumer = None,
) -> None:
    """Forget a watermark: the next pass reads the whole scope."""
    c = ctx_of(ctx)
    scope_value, name = _scope(c, scope), _consumer(c, consumer)
    existed = consumers.watermarks(c).reset(StateKey.of(c.backend, name, scope_value))
    where = _scope_phrase(scope_value)
    if existed:
        output.hint(f"Watermark of consumer {name!r} on {where} removed; the next catchup reads the whole scope.")
    else:
        output.hint(f"Consumer {name!r} had no watermark on {where}; nothing changed.")


@watermark.command("prune", short_help="Forget consumers untouched for a while (default 30 days).")
def watermark_prune(
    ctx: typer.Context,
    idle: Idle = None,
    consumer: Consumer = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only name them.")] = False,
) -> None:
    """Forget every consumer whose every watermark is untouched for --idle days (30 unless given)."""
    c = ctx_of(ctx)
    days = consumers.check_idle(idle) or consumers.IDLE_DAYS
    gone = consumers.prune(c, days, None if consumer is None else c.consumer(consumer), dry_run)
    verb = "would forget" if dry_run else "forgot"
    output.hint(f"{verb} {len(gone)} consumer{'' if len(gone) == 1 else 's'} untouched for {days} days")
    for name in gone:
        sys.stdout.write(sanitize.line(name) + "\n")  # a consumer's name is stored text
