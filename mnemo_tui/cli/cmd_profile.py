"""Provides `mnemo profile list|use`: the profiles of config.toml."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from mnemo_tui.cli import output
from mnemo_tui.cli.commands import TableFormat, ctx_of, group
from mnemo_tui.errors import ValidationError

profile = group("profile", "The profiles of config.toml: list them, switch the default.")


@profile.command("list")
def profile_list(
    ctx: typer.Context,
    fmt: TableFormat = "table",
) -> None:
    """The profiles of config.toml, what each selects, and which one is in use."""
    c = ctx_of(ctx)
    from mnemo_tui.state.config import read_config

    output.check_format(fmt, allow_ndjson=False)
    config = read_config(c.settings.config_path)
    default = config.get("default_profile")
    found = []
    for name, section in config.get("profiles", {}).items():
        selects = section.get("endpoint") or section.get("store") or config.get("endpoint") or config.get("store")
        found.append(
            {
                "name": name,
                "default": name == default,
                "in_use": name == c.settings.profile,
                "endpoint": section.get("endpoint"),
                "store": section.get("store"),
                "selects": str(selects) if selects else "the default store",
            }
        )
    output.listing(
        fmt,
        found,
        empty=f"No profiles in {c.settings.config_path}. `mnemo login --endpoint URL` records one.",
        headers=["", "PROFILE", "SELECTS"],
        rows=[["*" if p["in_use"] else "", str(p["name"]), str(p["selects"])] for p in found],
    )


@profile.command("use", short_help="Switch the default profile (--none: no profile).")
def profile_use(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="A profile of config.toml.")] = None,
    none: Annotated[
        bool, typer.Option("--none", help="Use no profile: the top-level keys of config.toml, else the embedded store.")
    ] = False,
) -> None:
    """Make a profile the default (`default_profile` of config.toml); --none goes back to no profile."""
    c = ctx_of(ctx)
    from mnemo_tui.state.config import edit_config, read_config

    if (name is None) == (not none):
        raise ValidationError("give a profile NAME, or --none (not both)")
    profiles = read_config(c.settings.config_path).get("profiles", {})
    if name is not None and name not in profiles:
        import difflib

        near = difflib.get_close_matches(name, list(profiles), n=1)
        known = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(sorted(profiles)) or 'none'}"
        raise ValidationError(f"no profile {name!r} in {c.settings.config_path} ({known})")
    edit_config(c.settings.config_path, default_profile=name)
    if name is None:
        output.hint(f"No default profile now: commands read what the top of {c.settings.config_path} selects.")
    else:
        output.hint(f"Profile {name!r} is the default now.")
    if os.environ.get("MNEMO_PROFILE"):
        output.hint("note: MNEMO_PROFILE is set and wins over the default while it stays set")
