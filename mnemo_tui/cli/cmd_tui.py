"""Provides the `mnemo tui` command: the Textual feed over the selected backend (Textual imported only here)."""

from __future__ import annotations

from mnemo_tui.cli.context import Context
from mnemo_tui.cli.options import Args, scope_opt, text
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import parse_scope


class TuiArgs(Args):
    """The terminal UI: a live catch-up feed of your store and rooms."""

    scope = scope_opt("Scope to open first: omit for your own store.")
    consumer = text("--consumer", metavar="NAME", help="Whose watermarks the counts and 'mark caught up' use.")


def tui(c: Context, args: TuiArgs) -> None:
    scope_value = parse_scope(args.scope)
    consumer_name = args.consumer or c.settings.consumer
    if not consumer_name.strip() or len(consumer_name) > 200:
        raise ValidationError("--consumer must be 1 to 200 characters")
    backend = c.backend
    state = c.state
    from mnemo_tui.tui import MnemoApp  # the one command that starts the TUI imports it

    MnemoApp(backend, state, consumer=consumer_name, scope=scope_value).run()
