"""Provides `mnemo demo`: the embedded store filled with sample entries, rooms and a secret."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mnemo_tui.cli.commands import ctx_of
from mnemo_tui.cli.progress import Progress
from mnemo_tui.errors import ValidationError


def demo(
    ctx: typer.Context,
    entries: Annotated[
        int, typer.Option("--entries", "-n", metavar="N", help="How many entries in all (10 to 1,000,000).")
    ] = 2000,
    seed: Annotated[int | None, typer.Option("--seed", metavar="N", help="Repeatable content.")] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Add to a store that already holds entries (the new ones come after them).")
    ] = False,
) -> None:
    """Fill the embedded store with realistic sample entries, two rooms and a secret."""
    c = ctx_of(ctx, creates_store=True)
    from mnemo_tui.cli.context import open_engine
    from mnemo_tui.portable import demo as demo_data

    c.embedded_only("demo")
    if not demo_data.MIN_ENTRIES <= entries <= demo_data.MAX_ENTRIES:
        raise ValidationError(
            f"--entries must be between {demo_data.MIN_ENTRIES} and {demo_data.MAX_ENTRIES:,}, got {entries}"
        )
    store = open_engine(c.settings, creates=True)
    path = store.identity
    try:
        newest = demo_data.newest(store, c.settings.principal)
        if newest is not None and not force:
            raise ValidationError(
                f"the store {path} already holds entries: `mnemo demo` fills an empty store; add --force to "
                "add more (after the newest), or name another with --store"
            )
        from mnemo_tui.cli.cmd_vault import own_public

        # The sample secret is sealed to the user's own pair, so `mnemo vault get` can show it.
        seal_to = own_public(c)
        progress = Progress("entries written")
        try:
            summary = demo_data.fill(
                store, c.settings.principal, entries, seed=seed, progress=progress.update, after=newest, seal_to=seal_to
            )
        finally:
            progress.done()
    finally:
        store.close()
    lines = [
        f"Wrote {entries:,} demo entries and {summary.superseded} "
        f"{'revision' if summary.superseded == 1 else 'revisions'} to {summary.store} in {summary.seconds:.1f}s:",
        f"  your own store ({summary.principal!r}): {summary.own_entries:,} entries in "
        f"{len(summary.domains)} domains ({', '.join(summary.domains)}), {summary.superseded} superseded",
    ]
    for room, count, authors in summary.rooms:
        lines.append(
            f"  room {room.name!r} {room.address}: {count:,} {'entry' if count == 1 else 'entries'} "
            f"by {authors} {'author' if authors == 1 else 'authors'}"
        )
    if summary.secret is None:
        lines.append("  vault: unchanged")
    else:
        lines.append(f"  vault: secret {summary.secret!r}, sealed to your key pair: mnemo vault get {summary.secret}")
    first_room = summary.rooms[0][0].address if summary.rooms else "xroom:…"
    lines += [
        "Try:",
        "  mnemo recent                      # the newest page of your own store",
        f"  mnemo recent --scope {first_room}",
        "  mnemo catchup                     # everything new to you, then a watermark",
        "  mnemo tui",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
