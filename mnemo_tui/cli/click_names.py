"""Provides the names of Typer's own Click that mnemo needs and Typer does not export: the one import of `typer._click`.

Typer 0.28 vendors Click as `typer._click` and exports only a few of its names (`typer.Context`, `typer.BadParameter`,
`typer.Exit`); its classes are these, not the `click` package's (installed here for uvicorn only): an
`except click.UsageError` would never see Typer's errors. tests/cli/test_click_names.py fails if an upgrade moves them.
"""

from __future__ import annotations

from typer._click import Command, Context, HelpFormatter
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer._click.utils import PacifyFlushWrapper

__all__ = [
    "ClickException",
    "Command",
    "Context",
    "HelpFormatter",
    "NoArgsIsHelpError",
    "PacifyFlushWrapper",
    "UsageError",
]
