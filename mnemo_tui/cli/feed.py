"""Provides the bodies of `recent` and `catchup`, free of Typer so the start-up fast path can call them too."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from mnemo_tui import sanitize, timefmt
from mnemo_tui.catchup.walk import Walk, stream_wire
from mnemo_tui.cli import output, pager, terminal
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.hints import author_hint, continue_hint, room_name_hint, root_words
from mnemo_tui.cli.progress import Progress
from mnemo_tui.cli.table import TableWriter
from mnemo_tui.errors import ExitCode, ValidationError
from mnemo_tui.limits import MAX_LIMIT, parse_scope
from mnemo_tui.values.model import Entry, RecentQuery, Value
from mnemo_tui.values.text_page import TextPage

# A catch-up whose output was closed before the pass ended (a pager quit early, a closed pipe) moved no
# watermark: `ExitCode.OUTPUT_CLOSED`, not an interrupt, so a script can tell the two apart.
OUTPUT_CLOSED = (
    "mnemo: the output was closed before the catch-up ended (a pager quit early, or a closed pipe); "
    "the watermark did not move: the next pass re-reads (or run again with --resume)"
)

if TYPE_CHECKING:
    from mnemo_tui.catchup.catchup import CatchupResult
    from mnemo_tui.cli.options import CatchupOptions, RecentOptions
    from mnemo_tui.values.removals import Removal


def parse_times(since: str | None, until: str | None, *, utc: bool = False) -> tuple[int | None, int | None]:
    """`--since` and `--until` in microseconds; a date-only `--until` is its day's last microsecond.

    Raises:
        ValidationError: a value outside the time grammar, or `--until` before `--since`.
    """
    now = timefmt.now_us()
    low = timefmt.parse_time(since, field="--since", now=now, utc=utc) if since is not None else None
    high = timefmt.parse_time(until, field="--until", end_of_day=True, now=now, utc=utc) if until is not None else None
    if low is not None and high is not None and high < low:
        raise ValidationError(f"--until {until!r} is before --since {since!r}")
    return low, high


def check_limit_flag(limit: int, high: int = MAX_LIMIT) -> None:
    """`--limit` within 1..high, the error naming the flag the user typed.

    Raises:
        ValidationError: out of range.
    """
    if not 1 <= limit <= high:
        raise ValidationError(f"--limit must be between 1 and {high}, got {limit}")


def recent(c: Context, args: RecentOptions) -> int:
    """Run `mnemo recent`: one page (or, with `--all`, every page), in the chosen format.

    `args` holds the values of the options of `flags.RECENT`, by name.

    Returns:
        The exit code (0).
    """
    fmt = output.check_format(args.fmt)
    if args.follow:
        return _recent(c, args, fmt)
    with pager.paged(fmt, no_pager=c.no_pager, configured=c.settings.pager):
        return _recent(c, args, fmt)


def _recent(c: Context, args: RecentOptions, fmt: str) -> int:
    check_limit_flag(args.limit)
    for name, value in (("--author", args.author), ("--exclude-author", args.exclude_author)):
        if value is not None and not value.strip():
            raise ValidationError(f"{name} must not be blank")
    low, high = parse_times(args.since, args.until, utc=c.utc)
    query = RecentQuery(
        scope=resolved_scope(c, parse_scope(args.scope)) if args.cursor is None else parse_scope(args.scope),
        since=low,
        until=high,
        exclude_author=args.exclude_author,
        author=args.author,
        limit=args.limit,
        cursor=args.cursor,
        include_history=args.include_history,
    ).validated()
    if args.follow:
        from mnemo_tui.cli.follow import check_follow, follow

        check_follow(args)
        follow(c, query, fmt)
        return ExitCode.OK
    if args.all:
        _recent_all(c, query, fmt, reverse=args.reverse, wide=args.wide)
        return ExitCode.OK
    backend = c.backend
    out = sys.stdout
    page = backend.recent(query)
    items = page.items[::-1] if args.reverse else page.items
    report = None
    if not page.items:
        from mnemo_tui.catchup import empty_reports

        report = empty_reports.for_recent(backend, query)
    if fmt == "ndjson":
        output.ndjson(out, (e.wire for e in items))
        out.flush()
        if page.next_cursor:
            output.hint(f"next_cursor: {sanitize.line(page.next_cursor)}")
        if report is not None:
            output.hint(report.shown)
    elif fmt == "json":
        out.write(
            '{"items":['
            + ",".join(e.wire for e in items)
            + f'],"next_cursor":{output.dumps(page.next_cursor)},"scope":{output.dumps(query.scope)},'
            + f'"empty_report":{output.dumps(report.wire() if report else None)}}}\n'
        )
    else:
        table = TableWriter(out, scope=query.scope, utc=c.utc, wide=args.wide)
        if report is not None:
            table.report(report)
        else:
            table.rows(items)
            out.flush()
        if page.next_cursor:
            output.hint(continue_hint(query, page.next_cursor, root_words(c.root)))
    if report is not None:
        room_name_hint(backend, report)
        author_hint(backend, query)
    return ExitCode.OK


def resolved_scope(c: Context, scope: str | None) -> str | None:
    """The scope a command reads (`empty_reports.scope_by_name`: a room's name reads that room), said on stderr."""
    from mnemo_tui.catchup import empty_reports

    if scope is None or scope.startswith("xroom:"):
        return scope
    resolved, note = empty_reports.scope_by_name(c.backend, scope)
    if note is not None:
        output.hint(note)
    return resolved


def _recent_all(c: Context, query: RecentQuery, fmt: str, *, reverse: bool, wide: bool) -> None:
    """`recent --all`: streamed page by page; with `reverse`, held to the end and printed oldest first."""
    out = sys.stdout
    backend = c.backend
    progress = Progress("entries")
    count = 0
    if fmt == "table":
        table = TableWriter(out, scope=query.scope, utc=c.utc, wide=wide)
        held: list[list[Entry]] = []
        # Every item is printed whatever the page size, so walk in the largest pages there are.
        try:
            for fresh in Walk(backend, query.replace(limit=MAX_LIMIT)).pages():
                if fresh:
                    if reverse:
                        held.append(fresh[::-1])
                    else:
                        table.rows(fresh)
                        out.flush()
                    count += len(fresh)
                    progress.update(count)
        finally:
            progress.done()  # also when the reader went away (`| head`): no count is left on the terminal
        if held:
            table.rows([e for page in reversed(held) for e in page])
        if count == 0:
            from mnemo_tui.catchup import empty_reports

            empty = empty_reports.for_recent(backend, query)
            table.report(empty)
            room_name_hint(backend, empty)
            author_hint(backend, query)
        return
    write = out.write
    source = stream_wire(backend, query)
    try:
        chunks: Iterator[list[str] | TextPage] = (
            iter([list(c)[::-1] for c in reversed(list(source))]) if reverse else source
        )
        # A page that came as its items' texts (`TextPage`) is written as those bytes, in one write.
        if fmt == "json":
            write('{"items":[')
            for chunk in chunks:
                if count:
                    write(",")
                if isinstance(chunk, TextPage):
                    output.write_utf8(out, chunk.joined())
                else:
                    write(",".join(chunk))
                count += len(chunk)
                progress.update(count)
        else:
            for chunk in chunks:
                if isinstance(chunk, TextPage):
                    output.write_utf8(out, chunk.ndjson())
                else:
                    write("\n".join(chunk))
                    write("\n")
                count += len(chunk)
                progress.update(count)
    finally:
        source.close()  # a reader gone mid-stream (`| head`) ends the snapshot's statement now
        progress.done()
    report = None
    if count == 0:
        from mnemo_tui.catchup import empty_reports

        report = empty_reports.for_recent(backend, query)
    if fmt == "json":
        write(
            f'],"next_cursor":null,"scope":{output.dumps(query.scope)},'
            f'"empty_report":{output.dumps(report.wire() if report else None)}}}\n'
        )
    elif report is not None:
        out.flush()
        output.hint(report.shown)
    if report is not None:
        room_name_hint(backend, report)
        author_hint(backend, query)


def catchup(c: Context, args: CatchupOptions) -> int:
    """Run `mnemo catchup`: print what is new to this consumer, then commit its watermark.

    `args` holds the values of the options of `flags.CATCHUP`, by name.

    Returns:
        The exit code: 0, or 1 with `--exit-code` when nothing was new.
    """
    fmt = output.check_format(args.fmt)
    with pager.paged(fmt, no_pager=c.no_pager, configured=c.settings.pager):
        return _catchup(c, args, fmt)


def _catchup(c: Context, args: CatchupOptions, fmt: str) -> int:
    check_limit_flag(args.limit)
    if args.all_scopes:
        return _all_scopes(c, args, fmt)
    return _one_pass(c, args, fmt, resolved_scope(c, parse_scope(args.scope))).code


class Every:
    """What `catchup --all-scopes` shares between its passes: the JSON array they write into."""

    def __init__(self) -> None:
        self.documents = 0  # documents written into `{"scopes": [...]}` so far
        self.opened = False  # the current pass has written its document's head


class Pass(Value):
    """How one pass ended: its exit code, and whether it had something new."""

    code: int
    new: bool


def _all_scopes(c: Context, args: CatchupOptions, fmt: str) -> int:
    """`catchup --all-scopes`: a pass over the own store, then one over each room the reader belongs to.

    Each scope keeps its own watermark, moved only if its walk ended; a scope that fails is said on
    stderr (JSON: its document carries an `error`) and the others still run. The exit code is the first
    failed scope's, else 0 (`--exit-code`: 1 when no scope had anything new). A closed output stops
    them all (7): what follows could not be delivered either.
    """
    from mnemo_tui.errors import MnemoError

    if args.scope is not None:
        raise ValidationError("--all-scopes reads your own store and every room: it does not take --scope")
    # A usage error is said once, before any scope is read (each pass reads the same values again).
    consumer = c.consumer(args.consumer)
    if args.since is not None:
        timefmt.parse_time(args.since, field="--since", utc=c.utc)
    if args.overlap is not None:
        timefmt.parse_overlap(args.overlap)
    rooms = c.backend.rooms()
    scopes: list[tuple[str | None, str]] = [(None, "your own store")]
    scopes += [(r.address, f"room {sanitize.quoted(r.name)} ({sanitize.line(r.address)})") for r in rooms]
    every = Every()
    out = sys.stdout
    if fmt == "json":
        out.write('{"scopes":[')
    first_failure: int = ExitCode.OK
    new = False
    for scope, label in scopes:
        every.opened = False
        try:
            done = _one_pass(c, args, fmt, scope, every=every, label=label)
        except MnemoError as exc:
            output.hint(f"mnemo: {label}: {sanitize.line(exc.message)}")
            if fmt == "json":
                error = output.dumps({"exit_code": exc.exit_code, "message": exc.message})
                if not every.opened:
                    out.write(
                        f'{"," if every.documents else ""}{{"scope":{output.dumps(scope)},'
                        f'"consumer":{output.dumps(consumer)},"items":['
                    )
                out.write(f'],"error":{error}}}')
                every.documents += 1
            try:
                out.flush()
            except BrokenPipeError:
                terminal.silence_stdout()
                output.hint(OUTPUT_CLOSED)
                return ExitCode.OUTPUT_CLOSED
            done = Pass(exc.exit_code, False)
        if done.code == ExitCode.OUTPUT_CLOSED:
            return done.code
        first_failure = first_failure or done.code
        new = new or done.new
    if fmt == "json":
        out.write("]}\n")
    elif not new and fmt == "table":
        out.write(
            f"Nothing new for consumer {consumer!r} in your own store or your "
            f"{len(rooms)} room{'' if len(rooms) == 1 else 's'}.\n"
        )
    if first_failure:
        return first_failure
    return ExitCode.FAILED if args.exit_code and not new else ExitCode.OK


def _one_pass(
    c: Context, args: CatchupOptions, fmt: str, scope_value: str | None, *, every: Every | None = None, label: str = ""
) -> Pass:
    """One catch-up pass of one scope, written in `fmt`; part of `--all-scopes` when `every` is given."""
    from mnemo_tui.catchup.catchup import CatchUp
    from mnemo_tui.cli import consumers

    consumer_name = c.consumer(args.consumer)
    low = timefmt.parse_time(args.since, field="--since", utc=c.utc) if args.since is not None else None
    overlap_us = timefmt.parse_overlap(args.overlap) if args.overlap is not None else None
    backend = c.backend
    walk = CatchUp(
        backend,
        consumers.watermarks(c),
        consumer=consumer_name,
        scope=scope_value,
        limit=args.limit,
        overlap=overlap_us,
        since=low,
        changes=args.changes,
        start=consumers.start_point(backend, scope_value, args.start, utc=c.utc),
    )
    out = sys.stdout
    # Under --all-scopes every row shows its domain (a room's address), so each item keeps its scope.
    shown_scope = None if every is not None else scope_value
    table = TableWriter(out, scope=shown_scope, utc=c.utc, wide=args.wide) if fmt == "table" else None
    progress = Progress("new")
    counted = [0]
    held: list[list[Entry]] = []

    head = f'{{"scope":{output.dumps(scope_value)},"consumer":{output.dumps(consumer_name)},"items":['
    if every is not None and every.documents:
        head = "," + head

    def hold(entries: list[Entry]) -> None:
        held.append(entries[::-1])

    def deliver() -> None:
        entries = [e for page in reversed(held) for e in page]
        if entries:
            counted[0] = 0
            emit(entries)

    def emit(entries: list[Entry]) -> None:
        if fmt == "ndjson":
            output.ndjson(out, (e.wire for e in entries))
        elif fmt == "json":
            # The document opens with its first items: a pass refused before it read (a run of the same
            # consumer already going) leaves no fragment on stdout.
            out.write((head if not counted[0] else ",") + ",".join(e.wire for e in entries))
            if every is not None:
                every.opened = True
        else:
            assert table is not None
            table.rows(entries)
        # The checkpoint saved after this returns must only cover output that really left.
        out.flush()
        counted[0] += len(entries)
        progress.update(counted[0])

    def removed(items: list[Removal]) -> None:
        if fmt == "ndjson":
            out.write("".join(output.dumps({"removed": r.wire()}) + "\n" for r in items))
        elif table is not None:
            table.removed(items)
        out.flush()  # before the commit: a removal reported is one that left

    try:
        result = walk.run(
            hold if args.reverse else emit,
            commit=not args.no_commit,
            resume=args.resume,
            notice=output.hint,
            deliver=deliver if args.reverse else None,
            removed=removed,
        )
    except BrokenPipeError:
        terminal.silence_stdout()
        progress.done()
        output.hint(OUTPUT_CLOSED)
        return Pass(ExitCode.OUTPUT_CLOSED, False)
    except KeyboardInterrupt:
        progress.settle()  # the line left above "interrupted" says how many were delivered
        raise
    progress.done()
    report = None
    if result.delivered == 0 and (every is None or fmt == "json"):  # --all-scopes prints none but in JSON
        from mnemo_tui.catchup import empty_reports

        report = empty_reports.for_catchup(backend, scope_value, result.before, low)
    from mnemo_tui.state.statedb import watermark_wire

    new = result.delivered > 0 or bool(result.removed)
    if fmt == "json":
        marks = {"before": watermark_wire(result.before), "after": watermark_wire(result.after)}
        removals = f',"removed":{output.dumps([r.wire() for r in result.removed])}' if args.changes else ""
        out.write(
            ("" if counted[0] else head)
            + f"]{removals}"
            + f',"watermark":{output.dumps(marks)},"pages":{result.pages},"repeats_skipped":{result.repeats_skipped},'
            f'"resumed":{output.dumps(result.resumed)},"empty_report":{output.dumps(report.wire() if report else None)}}}'
            + ("\n" if every is None else "")
        )
        if every is not None:
            every.documents += 1
    elif every is not None:
        # One line per scope on stderr (its empty report would name as unsearched the rooms this pass reads).
        out.flush()
        if new:
            output.hint(f"{label}: " + _catchup_summary(result, consumer_name, c.utc))
        else:
            mark = result.before.created_at if result.before is not None else None
            since = "" if mark is None else f" since your watermark {timefmt.shown(mark, c.utc)}"
            output.hint(f"{label}: nothing new for consumer {consumer_name!r}{since}")
        return Pass(ExitCode.OK, new)
    elif fmt == "ndjson":
        if report is not None and not result.removed:  # removals reported are something new, as in the table
            output.hint(report.shown)
    else:
        assert table is not None
        if report is not None and not result.removed:
            table.report(report)
        else:
            out.flush()
            output.hint(_catchup_summary(result, consumer_name, c.utc))
    if report is not None and every is None:
        room_name_hint(backend, report)
    if args.exit_code and not new and every is None:
        return Pass(ExitCode.FAILED, new)
    return Pass(ExitCode.OK, new)


def _catchup_summary(result: CatchupResult, consumer: str, utc: bool) -> str:
    delivered, pages, repeats = result.delivered, result.pages, result.repeats_skipped
    if not result.committed:
        moved = "watermark not moved (--no-commit)"
    elif result.after is not None and result.after.created_at is not None:
        moved = f"watermark now {timefmt.shown(result.after.created_at, utc)}"
    else:
        moved = "watermark moved"
    noun = "entry" if delivered == 1 else "entries"
    read = "1 page" if pages == 1 else f"{pages} pages"  # a request each, or a line of a streamed walk
    text = f"{delivered} new {noun} for consumer {consumer!r} in {read}; {moved}"
    again = "1 entry you already had was" if repeats == 1 else f"{repeats} entries you already had were"
    removed = len(result.removed)
    gone = f"; {removed} removal{'' if removed == 1 else 's'} reported" if removed else ""
    return text + gone + (f"; {again} not shown again" if repeats else "")
