"""Provides what `mnemo` itself, `recent` and `catchup` were given: a `Value` of the options of each table of
`flags.py`, built by the start-up fast path and by the Typer commands alike (tests/cli/test_option_values.py
holds each to its table). Not in `flags.py`: `mnemo --version` needs none of it.
"""

from __future__ import annotations

from mnemo_tui.values.model import Value


class RootOptions(Value):
    """The values of `ROOT`'s options by name: as given, else their defaults."""

    profile: str | None
    store: str | None
    endpoint: str | None
    database: str | None
    debug: bool
    utc: bool
    no_pager: bool
    version: bool


class RecentOptions(Value):
    """The values of `RECENT`'s options by name: as given, else their defaults."""

    scope: str | None
    since: str | None
    until: str | None
    limit: int
    cursor: str | None
    all: bool
    author: str | None
    exclude_author: str | None
    include_history: bool
    follow: bool
    reverse: bool
    wide: bool
    fmt: str


class CatchupOptions(Value):
    """The values of `CATCHUP`'s options by name: as given, else their defaults."""

    scope: str | None
    consumer: str | None
    since: str | None
    limit: int
    start: str | None
    overlap: str | None
    no_commit: bool
    resume: bool
    exit_code: bool
    changes: bool
    all_scopes: bool
    reverse: bool
    wide: bool
    fmt: str
