"""Provides the one declaration of every CLI option (no Typer here): Typer's commands and the fast path read it."""

from __future__ import annotations

from mnemo_tui import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Generic, TypeVar, overload

    T = TypeVar("T")

    class _Typed(Generic[T]):
        """To the type checker, an option is generic in the value it reads as."""

else:
    # At run time a plain base: `mnemo recent` imports no typing (docs/architecture.md).

    class _Typed:
        def __class_getitem__(cls, item: object) -> type:
            return cls

    T = None


class Opt(_Typed[T]):
    """One option (or argument) of a command: its flags, value, help and default.

    Declared as a class attribute of an `Args` class, it reads as the parsed value on an instance.
    `kind` is how the value is spelled on a command line: `text`, `int`, `flag` (no value),
    `texts` (repeatable) or `argument` (positional).
    """

    __slots__ = ("default", "flags", "help", "kind", "metavar", "name", "required")

    def __init__(
        self,
        kind: str,
        flags: tuple[str, ...],
        *,
        help: str,
        default: Any = None,
        metavar: str | None = None,
        required: bool = False,
    ) -> None:
        self.kind = kind
        self.flags = flags
        self.help = help
        self.default = default
        self.metavar = metavar
        self.required = required
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type | None = None) -> Opt[T]: ...
        @overload
        def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Opt[T] | T:
        if obj is None:
            return self
        value: T = obj.__dict__[self.name]
        return value


def text(*flags: str, metavar: str, help: str, default: str | None = None) -> Opt[str | None]:
    """An option that takes one value (None when not given, unless it has a default)."""
    return Opt("text", flags, metavar=metavar, help=help, default=default)


def given(*flags: str, metavar: str, help: str, default: str) -> Opt[str]:
    """An option that takes one value and always has one (its default)."""
    return Opt("text", flags, metavar=metavar, help=help, default=default)


def required(*flags: str, metavar: str, help: str) -> Opt[str]:
    """An option that must be given."""
    return Opt("text", flags, metavar=metavar, help=help, required=True)


def number(*flags: str, metavar: str, help: str, default: int) -> Opt[int]:
    """An option that takes a whole number."""
    return Opt("int", flags, metavar=metavar, help=help, default=default)


def maybe_number(*flags: str, metavar: str, help: str) -> Opt[int | None]:
    """An option that takes a whole number, None when not given."""
    return Opt("int", flags, metavar=metavar, help=help)


def flag(*flags: str, help: str, default: bool = False) -> Opt[bool]:
    """An option without a value (`--all`), or a pair (`--probe-room/--no-probe-room`)."""
    return Opt("flag", flags, help=help, default=default)


def texts(*flags: str, metavar: str, help: str) -> Opt[list[str] | None]:
    """An option that may be repeated (None when never given)."""
    return Opt("texts", flags, metavar=metavar, help=help)


def argument(metavar: str, help: str, *, default: str | None = None) -> Opt[str | None]:
    """A positional argument (optional when it has a default, None included)."""
    return Opt("argument", (), metavar=metavar, help=help, default=default)


def required_argument(metavar: str, help: str) -> Opt[str]:
    """A positional argument that must be given."""
    return Opt("argument", (), metavar=metavar, help=help, required=True)


def arguments(metavar: str, help: str) -> Opt[list[str]]:
    """One or more positional arguments."""
    return Opt("arguments", (), metavar=metavar, help=help, required=True)


class Args:
    """The parsed options of one command; subclasses declare each option once, as an `Opt` attribute.

    The class docstring is the command's help; `summary` its line in the command list.
    """

    summary: str | None = None
    # Whether the command may create the embedded store (a write); a read of a missing store never does.
    creates_store = False

    def __init__(self, **values: Any) -> None:
        for opt in self.options():
            self.__dict__[opt.name] = values.get(opt.name, opt.default)

    @classmethod
    def options(cls) -> list[Opt[Any]]:
        """Every option of the command, in the order declared (a base class's first)."""
        found: dict[str, Opt[Any]] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Opt):
                    found[name] = value
        return list(found.values())


# -- options several commands share: each declared here once -------------------------------------


def scope_opt(help: str = "Omit for your own store; a domain; or xroom:<room_id>.") -> Opt[str | None]:
    return text("--scope", "-s", metavar="SCOPE", help=help)


def since_opt(help: str = "Inclusive low bound (ISO-8601, date, 15m, 2h, today...).") -> Opt[str | None]:
    return text("--since", metavar="TIME", help=help)


def until_opt() -> Opt[str | None]:
    return text("--until", metavar="TIME", help="Inclusive high bound (same grammar as --since).")


def limit_opt(default: int, help: str = "Page size, 1-100.") -> Opt[int]:
    return number("--limit", "-n", metavar="N", help=help, default=default)


def consumer_opt(help: str = "Reader name (default: the configured one).", *short: str) -> Opt[str | None]:
    return text("--consumer", *short, metavar="NAME", help=help)


def include_history_opt() -> Opt[bool]:
    return flag("--include-history", help="Include superseded revisions.")


def entry_format_opt() -> Opt[str]:
    """`--format` of a command whose output is a list of entries (CLI.md: only they have ndjson)."""
    return given("--format", "-f", metavar="FORMAT", help="table, json or ndjson.", default="table")


def reverse_opt() -> Opt[bool]:
    return flag("--reverse", "-r", help="Oldest first (read a catch-up top to bottom); the walk itself is unchanged.")


def wide_opt() -> Opt[bool]:
    return flag("--wide", "-w", help="Tables: wrap each entry's whole content instead of its first line.")


def table_format_opt() -> Opt[str]:
    """`--format` of every other command."""
    return given("--format", "-f", metavar="FORMAT", help="table or json.", default="table")


# -- the root, and the two commands the start-up fast path runs --------------------------------


class RootArgs(Args):
    """Catch up on agent memory."""

    profile = text("--profile", metavar="NAME", help="Profile of config.toml to use.")
    store = text("--store", metavar="PATH", help="Embedded store file (selects the embedded engine).")
    endpoint = text("--endpoint", metavar="URL", help="REST base URL (selects the remote backend).")
    database = text(
        "--database", metavar="URL", help="PostgreSQL URL, postgresql://USER@HOST/DB (selects the PostgreSQL engine)."
    )
    debug = flag("--debug", help="Show tracebacks of errors.")
    utc = flag("--utc", help="Show and read wall-clock times in UTC, not local time (also `utc = true`).")
    no_pager = flag("--no-pager", help="Never page long output on a terminal.")
    version = flag("--version", help="Print mnemo's version and exit.")


# Root flags accepted anywhere before `--` (`mnemo recent --utc`), moved in front of the command.
HOISTED = ("--debug", "--utc", "--no-pager")


class RecentArgs(Args):
    """One page of the feed, newest first (--all: every page; --follow: then each new one, live)."""

    summary = "The newest page of the feed (--all: every page; -F: live)."

    scope = scope_opt()
    since = since_opt()
    until = until_opt()
    limit = limit_opt(20)
    cursor = text(
        "--cursor", metavar="CURSOR", help="Continue from a previous page's cursor (with the same scope and filters)."
    )
    all = flag("--all", help="Follow cursors to the end of the feed, streaming.")
    author = text("--author", metavar="AUTHOR", help="Only entries by this author (principal, or principal/agent).")
    exclude_author = text(
        "--exclude-author", metavar="AUTHOR", help="Drop entries by this author (principal, or principal/agent)."
    )
    include_history = include_history_opt()
    follow = flag("--follow", "-F", help="Then print each new entry as it lands, until ^C (table or ndjson).")
    reverse = reverse_opt()
    wide = wide_opt()
    fmt = entry_format_opt()


class CatchupArgs(Args):
    """Print only what is new to this consumer, then commit the watermark."""

    summary = "What is new to this consumer; then commits its watermark."
    scope = scope_opt()
    consumer = consumer_opt("Reader name; one watermark per scope each.", "-c")
    since = since_opt("Read nothing older than this (with a watermark: the later of the two).")
    limit = limit_opt(100, "Page size of each request, 1-100.")
    overlap = text(
        "--overlap", metavar="SPAN", help="Re-read this span below the watermark (default 0 embedded, 2s endpoint)."
    )
    no_commit = flag("--no-commit", help="Touch neither the watermark nor the checkpoint.")
    resume = flag("--resume", help="Continue an interrupted walk from its checkpoint.")
    exit_code = flag("--exit-code", help="Exit 1 when nothing is new.")
    reverse = reverse_opt()
    wide = wide_opt()
    fmt = entry_format_opt()
