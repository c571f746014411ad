"""Provides the export and import commands: leave with your data, and bring it back (docs/export.md)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO, TYPE_CHECKING, Annotated

import typer

from mnemo_tui import timefmt
from mnemo_tui.cli import output, terminal
from mnemo_tui.cli.commands import Scope, TableFormat, ctx_of
from mnemo_tui.cli.feed import resolved_scope
from mnemo_tui.cli.progress import Progress
from mnemo_tui.errors import LocalStateError, ValidationError
from mnemo_tui.limits import parse_scope, room_of
from mnemo_tui.sanitize import line as safe
from mnemo_tui.sanitize import quoted

if TYPE_CHECKING:
    from mnemo_tui.backends import Backend
    from mnemo_tui.state.config import Settings


def export(
    ctx: typer.Context,
    scope: Scope = None,
    since: Annotated[
        str | None, typer.Option("--since", metavar="TIME", help="Only entries at or after this time.")
    ] = None,
    cursor: Annotated[
        str | None,
        typer.Option("--cursor", metavar="CURSOR", help="Only what is new since the export whose end line gave it."),
    ] = None,
) -> None:
    """Every entry and room you may read as versioned NDJSON on stdout; never a secret."""
    from mnemo_tui.portable.export import export as run_export

    c = ctx_of(ctx)
    if since is not None and cursor is not None:
        raise ValidationError("--since and --cursor do not go together: the cursor says where to continue")
    low = timefmt.parse_time(since, field="--since", utc=c.utc) if since is not None else None
    scope = resolved_scope(c, parse_scope(scope))  # a room's name reads that room, as every read does
    output.check_format("ndjson")  # stdout as UTF-8 bytes, whatever the locale
    progress = Progress("entries exported")
    out: IO[str] | _ForTerminal = sys.stdout
    if terminal.is_tty(sys.stdout):
        out = _ForTerminal(sys.stdout)
        progress.enabled = False  # the data is on a terminal (stderr's too, often): a bar would land in it
    try:
        done = run_export(
            c.backend,
            out.write,
            scope=scope,
            since=low,
            cursor=cursor,
            progress=progress.update,
            expect=progress.expect if progress.enabled else None,
        )
    except KeyboardInterrupt:
        progress.done()
        output.hint("mnemo: the export on stdout is incomplete (it has no end line, and import refuses it)")
        raise
    finally:
        progress.done()
    sys.stdout.flush()
    if done.entries == 0 and scope is not None and since is None and cursor is None:
        _no_such_domain(c.backend, scope)
    secrets = "the vault was not listed" if done.secrets_left_out is None else f"{done.secrets_left_out} secret(s)"
    output.hint(
        f"exported {_entries(done.entries)} and {done.rooms} room(s); left out: {secrets} (the vault is never "
        "exported). For what comes later: mnemo export --cursor <the end line's cursor>"
    )


def _no_such_domain(backend: Backend, scope: str) -> None:
    """An export of a domain the own store does not have (a typo) says so, and the nearest name, as reads do."""
    from mnemo_tui.catchup.empty_reports import scope_hints
    from mnemo_tui.values.model import EmptyReport

    if room_of(scope) is not None or scope in backend.domains():
        return
    output.hint(f"note: your own store has no domain {quoted(scope)}: nothing was exported")
    for hint in scope_hints(backend, EmptyReport("empty_scope", scope, "")):
        output.hint(hint)


def _entries(count: int) -> str:
    return f"{count:,} {'entry' if count == 1 else 'entries'}"


def _fresh_store(settings: Settings) -> str | None:
    """The embedded store file this import is about to create (None: it exists, or the backend is another)."""
    if settings.endpoint or settings.database or settings.store_path is None:
        return None
    return None if os.path.lexists(settings.store_path) else settings.store_path


def _remove_fresh(backend: Backend | None, path: str | None) -> None:
    """Remove the store file a refused import created, and SQLite's files beside it (closed first)."""
    if path is None:
        return
    if backend is not None:
        backend.close()
    for name in (path, path + "-wal", path + "-shm", path + "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


class _ForTerminal:
    """stdout on a terminal: the export's JSON with what a terminal would act on escaped (the same values)."""

    def __init__(self, real: IO[str]) -> None:
        self.real = real

    def write(self, data: str) -> int:
        return self.real.write(output.json_for_terminal(data))


def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE", help="An export of `mnemo export`, or - for stdin.")],
    fmt: TableFormat = "table",
) -> None:
    """Put an export into this backend; importing it twice stores nothing new."""
    from mnemo_tui.portable.load import load

    c = ctx_of(ctx, creates_store=True)
    output.check_format(fmt, allow_ndjson=False)
    name = "stdin" if source == "-" else source
    if source == "-" and sys.stdin.isatty():  # as `verify --expect -`: waiting at a terminal looks like a hang
        raise ValidationError(
            "import - reads an export from a pipe, but stdin is a terminal: pipe it in, or name a file"
        )
    try:
        stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ValidationError(f"cannot read {name}: {exc.strerror or exc}") from None
    progress = Progress("entries imported")
    fresh = _fresh_store(c.settings)
    backend: Backend | None = None
    try:
        backend = c.backend
        done = load(backend, stream, name, progress=progress.update)
    except BaseException as exc:
        _remove_fresh(backend, fresh)  # a refused import leaves no store behind that it created
        if isinstance(exc, UnicodeDecodeError):
            raise ValidationError(f"{name} is not UTF-8 text") from None
        raise
    finally:
        progress.done()
        if stream is not sys.stdin.buffer:
            stream.close()
    skipped = sum(done.skipped_rooms.values())
    said = (
        f"imported {_entries(done.entries)}: {done.created:,} stored, {done.present + done.by_ref:,} already "
        f"there, {skipped:,} skipped; rooms: {done.rooms_created} created, {done.rooms_present} already there"
    )
    try:
        sys.stdout.write((output.dumps(done.wire()) if fmt == "json" else said) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:  # committed already: say so, or the exit code would say the import failed
        raise LocalStateError(
            f"the import is stored ({said}), but its report could not be written: {exc.strerror or exc}"
        ) from None
    if done.assigned:
        output.hint(
            f"note: {_entries(done.assigned)} got new times from the store's clock (their scope held newer "
            "entries, or this is an endpoint): an older time would land behind readers' cursors and watermarks"
        )
    if done.future:
        from mnemo_tui.engine.exchange import FUTURE_SKEW_US

        output.hint(
            f"note: {done.future:,} of them were dated in the future (after this machine's clock + "
            f"{FUTURE_SKEW_US // 60_000_000} minutes): "
            "a kept future time would hold the store's clock ahead of every later write"
        )
    if done.differing:
        output.hint(
            f"note: {_entries(done.differing)} named an id already stored here with another content: the stored "
            "one was kept (ids are kept, so an id holds one entry)"
        )
    if done.links_dropped:
        output.hint(f"note: {done.links_dropped:,} supersession links named entries not imported here; left out")
    for room, count in sorted(done.skipped_rooms.items()):
        output.hint(
            f"note: {count:,} entries of xroom:{safe(room)} were not imported: you may not write to that room "
            "here (rooms are created only by an import onto an embedded store or database)"
        )
