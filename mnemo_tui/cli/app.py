"""Provides the Typer app: the root options, and the table of commands, each imported from its module when used.

To add a command: write it as a Typer function (or a `commands.group` of them) in a `cmd_*.py`
module, and add one row to `COMMANDS` below with its name, its module and its line in `mnemo --help`.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer
import typer.main
from typer.core import TyperGroup

from mnemo_tui.cli.click_names import Command, Context, HelpFormatter
from mnemo_tui.cli.commands import HELP_FLAGS, Typer, option
from mnemo_tui.cli.flags import ROOT
from mnemo_tui.cli.options import RootOptions
from mnemo_tui.values.model import Value


class Row(Value):
    """One command of `mnemo`: where its Typer function (or group) lives, and its line in `mnemo --help`."""

    module: str
    attr: str
    summary: str


# In the order `mnemo --help` lists them.
COMMANDS = {
    "write": Row("mnemo_tui.cli.cmd_entries", "write", "Store an entry; prints its atom_id."),
    "recent": Row("mnemo_tui.cli.cmd_feed", "recent", "The newest page of the feed (--all: every page; -F: live)."),
    "catchup": Row("mnemo_tui.cli.cmd_feed", "catchup", "What is new to this consumer; then commits its watermark."),
    "search": Row(
        "mnemo_tui.cli.cmd_entries", "search", "Search entries (needs a query; `mnemo recent` lists without)."
    ),
    "show": Row("mnemo_tui.cli.cmd_atoms", "show", "One entry whole, with its supersession chain."),
    "delete": Row(
        "mnemo_tui.cli.cmd_atoms", "delete", "Delete your entries, or any of a room you own (asks first, or --yes)."
    ),
    "login": Row("mnemo_tui.cli.cmd_login", "login", "Keep an endpoint's API key in the OS keyring."),
    "logout": Row("mnemo_tui.cli.cmd_login", "logout", "Forget the endpoint's key, and undo what login recorded."),
    "status": Row("mnemo_tui.cli.cmd_status", "status", "Which backend, as whom, where the key and state live."),
    "demo": Row("mnemo_tui.cli.cmd_demo", "demo", "Fill the embedded store with sample entries, rooms, a secret."),
    "serve": Row("mnemo_tui.cli.cmd_server", "serve", "Serve the embedded store over REST until Ctrl-C."),
    "tui": Row("mnemo_tui.cli.cmd_tui", "tui", "The terminal UI: a live catch-up feed of your store and rooms."),
    "mcp": Row("mnemo_tui.cli.cmd_mcp", "mcp", "Serve the memory tools to an MCP client over stdio."),
    "check": Row(
        "mnemo_tui.cli.cmd_proof", "check", "Probe the feed with four checks (see --help); exit 1 on a failure."
    ),
    "verify": Row(
        "mnemo_tui.cli.cmd_proof", "verify", "Every expected id once in the walk, none twice; exit 1 if not."
    ),
    "rooms": Row("mnemo_tui.cli.cmd_rooms", "rooms", "Shared rooms: list, create, invite, join, delete."),
    "vault": Row("mnemo_tui.cli.cmd_vault", "vault", "Secrets, sealed on this machine: list, add, get, key pairs."),
    "watermark": Row(
        "mnemo_tui.cli.cmd_watermark", "watermark", "Inspect and manage watermarks per backend, consumer and scope."
    ),
    "profile": Row(
        "mnemo_tui.cli.cmd_profile", "profile", "The profiles of config.toml: list them, switch the default."
    ),
    "keys": Row("mnemo_tui.cli.cmd_server", "keys", "API keys of `mnemo serve`: create, list, revoke."),
    "db": Row("mnemo_tui.cli.cmd_server", "db", "Copy an embedded store into PostgreSQL. The search's language."),
    "export": Row("mnemo_tui.cli.cmd_exchange", "export", "Every entry and room you may read, as NDJSON; no secret."),
    "import": Row(
        "mnemo_tui.cli.cmd_exchange", "import_", "Put an export into this backend; twice stores nothing new."
    ),
    "help": Row("mnemo_tui.cli.cmd_help", "help_", "Show the help of mnemo or of a command (as COMMAND --help)."),
}


def load(name: str) -> Command:
    """The click command of the row `name`: its module imported, its Typer function or group built."""
    row = COMMANDS[name]
    target = getattr(importlib.import_module(row.module), row.attr)
    holder = Typer(rich_markup_mode=None)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name, short_help=row.summary)
    else:
        holder.command(name, short_help=row.summary)(target)
    return typer.main.get_group(holder).commands[name]


class LazyGroup(TyperGroup):
    """`mnemo`'s commands from the `COMMANDS` table: `mnemo show --help` imports and builds `show` alone."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load(cmd_name)
        return self.commands[cmd_name]

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        if args and args[0] not in COMMANDS:
            # A mistyped name: Typer suggests a close one among the commands built, so build them all.
            for name in COMMANDS:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        # `mnemo --help` lists the table's summaries, without importing every command's module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, row.summary) for name, row in COMMANDS.items()])


app = typer.Typer(
    name="mnemo",
    cls=LazyGroup,
    help="Catch up on agent memory: a queryless, newest-first feed per scope, walked with cursors.",
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    context_settings=HELP_FLAGS,
)


@app.callback()
def root(
    ctx: typer.Context,
    profile: Annotated[str | None, option(ROOT["profile"])] = None,
    store: Annotated[str | None, option(ROOT["store"])] = None,
    endpoint: Annotated[str | None, option(ROOT["endpoint"])] = None,
    database: Annotated[str | None, option(ROOT["database"])] = None,
    debug: Annotated[bool, option(ROOT["debug"])] = False,
    utc: Annotated[bool, option(ROOT["utc"])] = False,
    no_pager: Annotated[bool, option(ROOT["no_pager"])] = False,
    version: Annotated[bool, option(ROOT["version"])] = False,
) -> None:
    """Catch up on agent memory."""
    # Kept as given: the settings are resolved when a command first needs them (`commands.ctx_of`).
    ctx.obj = RootOptions(
        profile=profile,
        store=store,
        endpoint=endpoint,
        database=database,
        debug=debug,
        utc=utc,
        no_pager=no_pager,
        version=version,
    )
