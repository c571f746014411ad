"""Provides the `mnemo tui` command: the Textual feed over the selected backend (Textual imported only here)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui import sanitize
from mnemo_tui.cli.commands import ctx_of
from mnemo_tui.errors import ExitCode, MnemoError, ValidationError
from mnemo_tui.limits import parse_scope

if TYPE_CHECKING:
    from mnemo_tui.tui import MnemoApp


class TuiFailed(MnemoError):
    """The terminal UI stopped on an unexpected exception (exit 5; the traceback only with --debug)."""

    code = "INTERNAL"
    exit_code = ExitCode.BACKEND


def tui(
    ctx: typer.Context,
    scope: Annotated[
        str | None, typer.Option("--scope", "-s", metavar="SCOPE", help="Scope to open first: omit for your own store.")
    ] = None,
    consumer: Annotated[
        str | None,
        typer.Option("--consumer", metavar="NAME", help="Whose watermarks the counts and 'mark caught up' use."),
    ] = None,
) -> None:
    """The terminal UI: a live catch-up feed of your store and rooms."""
    c = ctx_of(ctx, creates_store=True)
    scope_value = parse_scope(scope)
    # Textual with no terminal never exits (it spins writing escape codes): refuse before starting it.
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ValidationError(
            "mnemo tui needs a terminal (stdin and stdout are not one); in a script or CI use mnemo recent or mnemo catchup"
        )
    consumer_name = c.consumer(consumer)
    from mnemo_tui.cli.feed import resolved_scope

    scope_value = resolved_scope(c, scope_value)  # a room's name opens that room, as `catchup` reads it
    backend = c.backend
    state = c.state
    from mnemo_tui.tui import MnemoApp  # the one command that starts the TUI imports it

    run_app(MnemoApp(backend, state, consumer=consumer_name, scope=scope_value), debug=c.settings.debug)


def run_app(app: MnemoApp, *, debug: bool, headless: bool = False) -> None:
    """Run the app; an exception inside it is exit 5 with one line, never exit 0 or a traceback with locals.

    Raises:
        TuiFailed: the app stopped on an exception (or with a non-zero return code).
    """
    app.run(headless=headless)
    failure = app.failure
    if failure is None and not app.return_code:
        return
    if debug and failure is not None:
        import traceback

        # A plain traceback (no local variables), its text made safe: messages may quote stored text.
        sys.stderr.write(sanitize.block("".join(traceback.format_exception(failure))))
    kind = type(failure).__name__ if failure is not None else f"exit code {app.return_code}"
    raise TuiFailed(f"the terminal UI stopped on an internal error ({kind}); re-run with --debug for details")
