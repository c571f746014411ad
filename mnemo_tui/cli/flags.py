"""Provides the options of `mnemo` itself, `recent` and `catchup` as plain data, free of Typer.

The start-up fast path (`mnemo_tui/cli/__init__.py`) parses these tables without importing Typer;
the Typer functions of the same options (`app.py`, `cmd_feed.py`) take their flags, help and
defaults from here, and tests/cli/test_flags.py checks that the two agree. What either path parsed is a
`Value` of the same fields (`options.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


class Flag:
    """One option: its spellings, how its value is read, its help, metavar and default.

    `kind` is `text` (one value), `int` (a whole number) or `flag` (no value: True when given).
    """

    __slots__ = ("default", "flags", "help", "kind", "metavar")

    def __init__(
        self, *flags: str, help: str, kind: str = "text", metavar: str | None = None, default: Any = None
    ) -> None:
        self.flags = flags
        self.help = help
        self.kind = kind
        self.metavar = metavar
        self.default: Any = False if kind == "flag" else default


ROOT = {
    "profile": Flag("--profile", metavar="NAME", help="Profile of config.toml to use."),
    "store": Flag("--store", metavar="PATH", help="Embedded store file (selects the embedded engine)."),
    "endpoint": Flag("--endpoint", metavar="URL", help="REST base URL (selects the remote backend)."),
    "database": Flag(
        "--database", metavar="URL", help="PostgreSQL URL, postgresql://USER@HOST/DB (selects the PostgreSQL engine)."
    ),
    "debug": Flag("--debug", kind="flag", help="Show tracebacks of errors."),
    "utc": Flag(
        "--utc", kind="flag", help="Show and read wall-clock times in UTC, not local time (also `utc = true`)."
    ),
    "no_pager": Flag("--no-pager", kind="flag", help="Never page long output on a terminal."),
    "version": Flag("--version", kind="flag", help="Print mnemo's version and exit."),
}

# Root flags accepted anywhere before `--` (`mnemo recent --utc`), moved in front of the command.
HOISTED = ("--debug", "--utc", "--no-pager")
# Root options with a value accepted after the command too (`mnemo recent --endpoint URL`), moved in front of
# it with their value; except where a command spells an option of its own alike (`login --endpoint URL`).
HOISTED_VALUED = ("--profile", "--store", "--endpoint", "--database")
OWN_OPTIONS = {"login": ("--endpoint",), "logout": ("--endpoint",)}

# Spelled the same by `recent`, `catchup` and other commands (commands.py declares those for Typer).
SCOPE = Flag("--scope", "-s", metavar="SCOPE", help="Omit for your own store; a domain; or xroom:<room_id>.")
ENTRY_FORMAT = Flag("--format", "-f", metavar="FORMAT", help="table, json or ndjson.", default="table")
REVERSE = Flag(
    "--reverse", "-r", kind="flag", help="Oldest first (read a catch-up top to bottom); the walk itself is unchanged."
)
WIDE = Flag("--wide", "-w", kind="flag", help="Tables: wrap each entry's whole content instead of its first line.")

RECENT = {
    "scope": SCOPE,
    "since": Flag("--since", metavar="TIME", help="Inclusive low bound (ISO-8601, date, 15m, 2h, today...)."),
    "until": Flag("--until", metavar="TIME", help="Inclusive high bound (same grammar as --since)."),
    "limit": Flag("--limit", "-n", kind="int", metavar="N", help="Page size, 1-100.", default=20),
    "cursor": Flag(
        "--cursor", metavar="CURSOR", help="Continue from a previous page's cursor (with the same scope and filters)."
    ),
    "all": Flag("--all", kind="flag", help="Follow cursors to the end of the feed, streaming."),
    "author": Flag("--author", metavar="AUTHOR", help="Only entries by this author (principal, or principal/agent)."),
    "exclude_author": Flag(
        "--exclude-author", metavar="AUTHOR", help="Drop entries by this author (principal, or principal/agent)."
    ),
    "include_history": Flag("--include-history", kind="flag", help="Include superseded revisions."),
    "follow": Flag(
        "--follow", "-F", kind="flag", help="Then print each new entry as it lands, until ^C (table or ndjson)."
    ),
    "reverse": REVERSE,
    "wide": WIDE,
    "fmt": ENTRY_FORMAT,
}

CATCHUP = {
    "scope": SCOPE,
    "consumer": Flag("--consumer", "-c", metavar="NAME", help="Reader name; one watermark per scope each."),
    "since": Flag(
        "--since", metavar="TIME", help="Read nothing older than this (with a watermark: the later of the two)."
    ),
    "limit": Flag("--limit", "-n", kind="int", metavar="N", help="Page size of each request, 1-100.", default=100),
    "start": Flag(
        "--start",
        metavar="WHERE",
        help="Where a consumer with no watermark begins: oldest (default), newest or a TIME.",
    ),
    "overlap": Flag(
        "--overlap", metavar="SPAN", help="Re-read this span below the watermark (default 0 embedded, 2s endpoint)."
    ),
    "no_commit": Flag("--no-commit", kind="flag", help="Touch neither the watermark nor the checkpoint."),
    "resume": Flag("--resume", kind="flag", help="Continue an interrupted walk from its checkpoint."),
    "exit_code": Flag("--exit-code", kind="flag", help="Exit 1 when nothing is new."),
    "changes": Flag(
        "--changes", kind="flag", help="Also report removals since the watermark (exit 8: re-read the scope)."
    ),
    "all_scopes": Flag(
        "--all-scopes", kind="flag", help="One pass over your own store and every room, a watermark per scope."
    ),
    "reverse": REVERSE,
    "wide": WIDE,
    "fmt": ENTRY_FORMAT,
}
