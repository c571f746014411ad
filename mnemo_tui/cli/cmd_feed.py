"""Provides the recent and catchup commands for Typer; their options are the plain data of `flags.py`.

The start-up fast path runs the same bodies (`feed.py`) from the same tables without Typer.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mnemo_tui.cli import feed
from mnemo_tui.cli.commands import EntryFormat, IncludeHistory, Scope, Since, Until, ctx_of, option
from mnemo_tui.cli.flags import CATCHUP, RECENT, REVERSE, WIDE
from mnemo_tui.cli.options import CatchupOptions, RecentOptions


def recent(
    ctx: typer.Context,
    scope: Scope = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, option(RECENT["limit"])] = RECENT["limit"].default,
    cursor: Annotated[str | None, option(RECENT["cursor"])] = None,
    all: Annotated[bool, option(RECENT["all"])] = False,
    author: Annotated[str | None, option(RECENT["author"])] = None,
    exclude_author: Annotated[str | None, option(RECENT["exclude_author"])] = None,
    include_history: IncludeHistory = False,
    follow: Annotated[bool, option(RECENT["follow"])] = False,
    reverse: Annotated[bool, option(REVERSE)] = False,
    wide: Annotated[bool, option(WIDE)] = False,
    fmt: EntryFormat = RECENT["fmt"].default,
) -> int:
    """One page of the feed, newest first (--all: every page; --follow: then each new one, live)."""
    values = RecentOptions(
        scope=scope,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
        all=all,
        author=author,
        exclude_author=exclude_author,
        include_history=include_history,
        follow=follow,
        reverse=reverse,
        wide=wide,
        fmt=fmt,
    )
    return feed.recent(ctx_of(ctx), values)


def catchup(
    ctx: typer.Context,
    scope: Scope = None,
    consumer: Annotated[str | None, option(CATCHUP["consumer"])] = None,
    since: Annotated[str | None, option(CATCHUP["since"])] = None,
    limit: Annotated[int, option(CATCHUP["limit"])] = CATCHUP["limit"].default,
    start: Annotated[str | None, option(CATCHUP["start"])] = None,
    overlap: Annotated[str | None, option(CATCHUP["overlap"])] = None,
    no_commit: Annotated[bool, option(CATCHUP["no_commit"])] = False,
    resume: Annotated[bool, option(CATCHUP["resume"])] = False,
    exit_code: Annotated[bool, option(CATCHUP["exit_code"])] = False,
    changes: Annotated[bool, option(CATCHUP["changes"])] = False,
    all_scopes: Annotated[bool, option(CATCHUP["all_scopes"])] = False,
    reverse: Annotated[bool, option(REVERSE)] = False,
    wide: Annotated[bool, option(WIDE)] = False,
    fmt: EntryFormat = CATCHUP["fmt"].default,
) -> int:
    """Print only what is new to this consumer, then commit the watermark."""
    values = CatchupOptions(
        scope=scope,
        consumer=consumer,
        since=since,
        limit=limit,
        start=start,
        overlap=overlap,
        no_commit=no_commit,
        resume=resume,
        exit_code=exit_code,
        changes=changes,
        all_scopes=all_scopes,
        reverse=reverse,
        wide=wide,
        fmt=fmt,
    )
    return feed.catchup(ctx_of(ctx), values)
