"""Tests of the lazy command table (mnemo_tui/cli/app.py): each row builds its command, and a typo still gets a hint."""

from __future__ import annotations

import pytest

from mnemo_tui.cli import main
from mnemo_tui.cli.app import COMMANDS, load


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_row_builds_the_command_it_names(name: str) -> None:
    command = load(name)
    assert command.name == name
    assert command.get_short_help_str() == COMMANDS[name].summary  # completion describes it as --help lists it


def test_a_mistyped_command_is_answered_with_the_close_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serach", "x"]) == 2
    assert (
        capsys.readouterr().err
        == "mnemo: No such command 'serach'. Did you mean 'search'?\nTry 'mnemo --help' for help.\n"
    )
