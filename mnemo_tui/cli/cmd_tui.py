"""Provides the `mnemo tui` command: the Textual feed over the selected backend (Textual imported only here)."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command()
    def tui(
        ctx: typer.Context,
        scope: Annotated[
            str | None,
            typer.Option("--scope", "-s", metavar="SCOPE", help="Scope to open first: omit for your own store."),
        ] = None,
        consumer: Annotated[
            str | None,
            typer.Option("--consumer", metavar="NAME", help="Whose watermarks the counts and 'mark caught up' use."),
        ] = None,
    ) -> None:
        """The terminal UI: a live catch-up feed of your store and rooms."""
        from mnemo_tui.cli.app import ctx_of
        from mnemo_tui.errors import ValidationError
        from mnemo_tui.model import parse_scope

        c = ctx_of(ctx)
        scope_value = parse_scope(scope)
        consumer_name = consumer or c.settings.consumer
        if not consumer_name.strip() or len(consumer_name) > 200:
            raise ValidationError("--consumer must be 1 to 200 characters")
        backend = c.backend
        state = c.state
        from mnemo_tui.tui import MnemoApp

        MnemoApp(backend, state, consumer=consumer_name, scope=scope_value).run()
