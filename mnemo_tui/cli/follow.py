"""Provides `recent --follow`: each new entry printed as it lands, until ^C, through an endpoint's outages."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from mnemo_tui import sanitize
from mnemo_tui.catchup.walk import Walk
from mnemo_tui.cli import output, terminal
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.table import TableWriter
from mnemo_tui.errors import Unavailable, ValidationError
from mnemo_tui.limits import EMBEDDED_PROBE_SECONDS, MAX_LIMIT
from mnemo_tui.values.model import Entry, RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.cli.options import RecentOptions
    from mnemo_tui.values.follow import Follow


def check_follow(args: RecentOptions) -> None:
    """`--follow` streams from the newest page on: one JSON document, a cursor or a high bound cannot.

    Raises:
        ValidationError: `--format json`, `--cursor`, `--until` or `--all` with it.
    """
    if args.fmt == "json":
        raise ValidationError("--follow streams entries as they land: use --format ndjson (json is one document)")
    given_flags = (("--cursor", args.cursor), ("--until", args.until), ("--all", args.all), ("--reverse", args.reverse))
    for name, given in given_flags:
        if given:
            raise ValidationError(
                f"--follow reads from the newest page (or --since) onward and never ends: it does not take {name} "
                "(for a stream a script reads, use --format ndjson)"
            )


# How often `--follow` polls an endpoint (the embedded store is probed: `limits.EMBEDDED_PROBE_SECONDS`).
FOLLOW_POLL_REMOTE = 1.0


def follow(c: Context, query: RecentQuery, fmt: str) -> None:
    """`recent --follow`: the newest page (or everything since `--since`), then each new entry as it lands.

    Entries are printed oldest first, the newest last (as `tail -f`). New entries are read by the
    walk layer's `LiveTracker`, the TUI's live feed: from the newest instant shown, inclusive, with
    the backend's overlap, dropping ids shown; the embedded store is read only when its change
    token moved. An endpoint that offers the push follow (`Backend.follow`) pushes them instead,
    one request while idle; one without it is polled. No watermark is read or moved. Runs until ^C
    (exit 130) or the backend fails.
    """
    import time

    from mnemo_tui.catchup.walk import LiveTracker, default_overlap

    out = sys.stdout
    if c.store_missing():
        # A store created later (a first `mnemo write`, `mnemo demo`) is followed from then on, as the TUI does.
        if terminal.is_tty(sys.stderr):
            output.hint("(no store yet: following from when one is created; ^C to stop)")
        while c.store_missing():
            time.sleep(EMBEDDED_PROBE_SECONDS)
        c.reopen()
    backend = c.backend
    tracker = LiveTracker(default_overlap(backend))
    table = TableWriter(out, scope=query.scope, utc=c.utc, follow=True) if fmt == "table" else None

    def emit(entries: list[Entry]) -> None:
        if not entries:
            return
        tracker.observe(entries)  # (already noted by `take`, which changes nothing then)
        oldest_first = entries[::-1]
        if table is not None:
            table.rows(oldest_first)
        else:
            output.ndjson(out, (e.wire for e in oldest_first))
        out.flush()

    pushed = backend.follow(query)
    if pushed is not None:
        # The endpoint pushes: its first event is the newest page (or everything since `--since`), then
        # each wake's new entries; heartbeats and removals print nothing (the output is entries only).
        tell_outages(pushed, backend.identity)
        try:
            first = True
            for event in pushed:
                emit(tracker.take(event.entries))
                if first and terminal.is_tty(sys.stderr):
                    output.hint("(following: new entries appear as they land; ^C to stop)")
                first = False
        finally:
            pushed.close()
        return
    probe = backend.change_token
    tracker.changed(probe)  # the token before the first read: any write after it is polled for
    if query.since is not None:
        emit([e for page in Walk(backend, query.replace(limit=MAX_LIMIT)).pages() for e in page])
    else:
        emit(backend.recent(query).items)
    if terminal.is_tty(sys.stderr):
        output.hint("(following: new entries appear as they land; ^C to stop)")
    base = query.replace(cursor=None)
    pause = FOLLOW_POLL_REMOTE if probe() is None else EMBEDDED_PROBE_SECONDS
    shown = sanitize.line(backend.identity)
    down = False
    while True:
        time.sleep(pause)
        try:
            if tracker.changed(probe):
                emit(tracker.poll(backend, base=base, max_pages=None).entries)
        except Unavailable as exc:
            # As the push follow: an outage never ends a follow. The failed poll took its own retries and
            # backoff (within MNEMO_DEADLINE); the next one starts from the newest entry shown.
            if not down:
                output.hint(
                    f"mnemo: cannot poll {shown} ({sanitize.line(exc.message)}); retrying until it answers (^C to stop)..."
                )
            down = True
            continue
        if down:
            output.hint(f"mnemo: {shown} answers again; resuming where it stopped")
            down = False


def tell_outages(pushed: Follow, endpoint: str) -> None:
    """Say on stderr, as it happens, that a push follow's stream dropped and is being reconnected (again at
    doubling intervals while it lasts), then that it is back; the follow reconnects until ^C (docs/cli.md).

    Said whether or not stderr is a terminal: an outage is an event a log should keep too (unlike progress),
    and stdout, the entries, is untouched. A refusal (a revoked key) still ends it, with `main`'s line.
    """
    shown = sanitize.line(endpoint)
    pushed.persistent = True  # as journalctl -f and kubectl get -w: an outage never ends a follow
    said: list[str] = []

    def tell(reason: str | None) -> None:
        if reason is None:
            said.clear()
            output.hint(f"mnemo: the follow reconnected to {shown}; resuming where it stopped")
        elif not said:
            said.append(reason)
            output.hint(
                f"mnemo: the follow's stream from {shown} dropped ({sanitize.line(reason)}); "
                "reconnecting until it answers (^C to stop)..."
            )
        else:
            output.hint(f"mnemo: {shown} is still down ({sanitize.line(reason)}); still reconnecting...")

    pushed.on_connection = tell
