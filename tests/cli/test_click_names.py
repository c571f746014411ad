"""Tests that the names of Typer's own Click mnemo imports (`cli/click_names.py`, the one import of `typer._click`)
are still the classes Typer uses: an upgrade that moves or replaces them fails here, not as an error left uncaught."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
import typer.core
import typer.main

from mnemo_tui.cli import click_names
from mnemo_tui.cli.app import app

PACKAGE = Path(__file__).resolve().parents[2] / "mnemo_tui"


def test_typers_public_classes_are_built_on_the_names_imported() -> None:
    assert issubclass(typer.Context, click_names.Context)
    assert issubclass(typer.core.TyperCommand, click_names.Command)
    assert issubclass(typer.BadParameter, click_names.UsageError)
    assert issubclass(click_names.UsageError, click_names.ClickException)
    assert issubclass(click_names.NoArgsIsHelpError, click_names.UsageError)


def test_typer_raises_the_names_imported() -> None:
    command = typer.main.get_command(app)
    with pytest.raises(click_names.NoArgsIsHelpError):
        command.main(args=[], prog_name="mnemo", standalone_mode=False)
    with pytest.raises(click_names.UsageError):
        command.main(args=["--bogus"], prog_name="mnemo", standalone_mode=False)
    formatter = command.make_context("mnemo", ["--help"], resilient_parsing=True).make_formatter()
    assert isinstance(formatter, click_names.HelpFormatter)


def test_the_pipe_wrapper_is_the_one_typer_puts_on_stdout() -> None:
    # Typer wraps stdout in it when a pipe closes; `cli.main` tells a closed pipe by it.
    source = Path(typer.core.__file__).read_text(encoding="utf-8")
    assert "_click.utils.PacifyFlushWrapper(sys.stdout)" in source
    assert click_names.PacifyFlushWrapper.__module__ == "typer._click.utils"


def test_typer_private_click_is_imported_in_one_module() -> None:
    users = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search(r"\btyper\._click\b", path.read_text(encoding="utf-8").split('"""', 2)[-1])
    ]
    assert users == ["cli/click_names.py"]
