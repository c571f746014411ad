"""Provides what the Typer command modules share: the invocation's context, group settings, and common options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from mnemo_tui.cli import completion, flags
from mnemo_tui.cli.click_names import Context as ClickContext
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.options import RootOptions

HELP_FLAGS = {"help_option_names": ["-h", "--help"]}


def ctx_of(ctx: typer.Context, *, creates_store: bool = False) -> Context:
    """The invocation's `Context`, resolved from the root options on first use.

    Resolving lazily keeps `mnemo COMMAND --help` working when config.toml is broken.
    `creates_store`: the command may create the embedded store (a write); a read never does.
    """
    root_ctx = ctx.find_root()
    obj = root_ctx.obj
    if isinstance(obj, RootOptions):
        obj = Context.of(obj)
        root_ctx.obj = obj
        root_ctx.call_on_close(obj.close)
    assert isinstance(obj, Context)
    obj.creates_store = creates_store
    return obj


class Command(TyperCommand):
    """A mnemo command: its usage line names a required argument by its metavar (`TIME`), as git's and gh's do,
    where Typer writes `{TIME}`; an optional one stays `[NAME]`."""

    def collect_usage_pieces(self, ctx: ClickContext) -> list[str]:
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in super().collect_usage_pieces(ctx)]


class Typer(typer.Typer):
    """A `typer.Typer` whose commands are `Command`s (every command of mnemo is registered through one)."""

    def command(
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[Any], Any]:
        return super().command(name, cls=cls or Command, **kwargs)


def group(name: str, help: str) -> Typer:
    """A command group (`mnemo rooms ...`): its commands are registered with `@group.command(...)`."""
    return Typer(
        name=name,
        help=help,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        context_settings=HELP_FLAGS,
    )


def option(flag: flags.Flag) -> Any:
    """The `typer.Option` of an option declared as plain data in `flags.py` (the fast path's).

    `--scope`, `--format` and `--consumer` complete their values from local state (`completion.py`).
    """
    values = _COMPLETES.get(flag.flags[0])
    return typer.Option(*flag.flags, metavar=flag.metavar, help=flag.help, autocompletion=values)


_COMPLETES: dict[str, Any] = {
    "--scope": completion.scopes,
    "--format": completion.entry_formats,
    "--consumer": completion.consumers,
}


# Options several commands spell the same way.
Scope = Annotated[str | None, option(flags.SCOPE)]
EntryFormat = Annotated[str, option(flags.ENTRY_FORMAT)]
TableFormat = Annotated[
    str,
    typer.Option("--format", "-f", metavar="FORMAT", help="table or json.", autocompletion=completion.table_formats),
]
Since = Annotated[str | None, option(flags.RECENT["since"])]
Until = Annotated[str | None, option(flags.RECENT["until"])]
IncludeHistory = Annotated[bool, option(flags.RECENT["include_history"])]
Yes = Annotated[
    bool, typer.Option("--yes", "-y", help="Delete without asking (required when stdin is not a terminal).")
]
InsecureStorage = Annotated[
    bool, typer.Option("--insecure-storage", help="Keep/read the key pair in a 0600 file, not the OS keyring.")
]
