"""Provides `mnemo help [COMMAND]`: a command's help, the same text as `mnemo COMMAND --help` (docs/cli.md)."""

from __future__ import annotations

import difflib
import sys
from typing import Annotated

import typer
from typer.core import TyperGroup as Group

from mnemo_tui.cli.click_names import Context as ClickContext
from mnemo_tui.errors import ValidationError


def help_(
    ctx: typer.Context,
    words: Annotated[
        list[str] | None,
        typer.Argument(metavar="[COMMAND]...", help="A command, or a group and its command (`watermark set`)."),
    ] = None,
) -> None:
    """Show the help of mnemo, or of a command (the same as `mnemo COMMAND --help`)."""
    target: ClickContext = ctx.find_root()
    for word in words or []:
        command = target.command
        sub = command.get_command(target, word) if isinstance(command, Group) else None
        if sub is None:
            raise ValidationError(_unknown(target, word))
        # resilient_parsing: the help of a command with a required argument, built without one
        target = sub.make_context(word, [], parent=target, resilient_parsing=True)
    sys.stdout.write(target.get_help() + "\n")


def _unknown(where: ClickContext, word: str) -> str:
    """`mnemo help nope`: no such command, with the near one if there is one, as a mistyped command gets."""
    command = where.command
    names = command.list_commands(where) if isinstance(command, Group) else []
    near = difflib.get_close_matches(word, names, n=1)
    path = where.command_path
    if not names:
        return f"`{path}` has no commands (try `{path} --help`)"
    hint = f"; did you mean {near[0]!r}?" if near else f" (try `{path} --help` for the list)"
    return f"no command {word!r} in `{path}`{hint}"
