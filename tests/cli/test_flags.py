"""Tests that the Typer functions of `mnemo`'s root, `recent` and `catchup` declare exactly the options of `flags.py`,
which the start-up fast path parses: the two ways in cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main

from mnemo_tui.cli import flags
from mnemo_tui.cli.app import app, load
from mnemo_tui.cli.click_names import Command

# Typer's own options of the root (shell completion), which the fast path never takes.
TYPERS_OWN = {"help", "install_completion", "show_completion"}
KINDS = {"text": "StringParamType", "int": "IntParamType", "flag": "BoolParamType"}  # click's types


def declared(command: Command) -> dict[str, dict[str, object]]:
    """What click parses for each option of `command`, by name, in the order it lists them."""
    return {
        str(p.name): {
            "flags": tuple(p.opts),
            "kind": type(p.type).__name__,
            "is_flag": getattr(p, "is_flag", False),
            "help": getattr(p, "help", None),
            "metavar": p.metavar,
            "default": p.default,
            "required": p.required,
        }
        for p in command.params
        if p.name not in TYPERS_OWN
    }


def tabled(table: dict[str, flags.Flag]) -> dict[str, dict[str, object]]:
    """The same, as the table of `flags.py` states it."""
    return {
        name: {
            "flags": flag.flags,
            "kind": KINDS[flag.kind],
            "is_flag": flag.kind == "flag",
            "help": flag.help,
            "metavar": flag.metavar,
            "default": flag.default,
            "required": False,
        }
        for name, flag in table.items()
    }


@pytest.mark.parametrize(("name", "table"), [("recent", flags.RECENT), ("catchup", flags.CATCHUP)])
def test_the_typer_command_takes_exactly_the_options_of_its_table(name: str, table: dict[str, flags.Flag]) -> None:
    command = load(name)
    assert declared(command) == tabled(table)
    assert list(declared(command)) == list(table)  # and lists them in --help in the table's order


def test_the_root_takes_exactly_the_options_of_its_table() -> None:
    assert declared(typer.main.get_command(app)) == tabled(flags.ROOT)


def test_a_changed_table_is_noticed() -> None:
    # The comparison itself would fail on drift: a help, a default or a spelling changed in the table only.
    for change in ({"help": "other"}, {"default": 21}, {"flags": ("--limit",)}, {"kind": "text"}):
        table = dict(flags.RECENT)
        limit = flags.Flag(
            *change.get("flags", table["limit"].flags),  # type: ignore[arg-type]
            kind=str(change.get("kind", "int")),
            help=str(change.get("help", table["limit"].help)),
            metavar=table["limit"].metavar,
            default=change.get("default", table["limit"].default),
        )
        table["limit"] = limit
        assert declared(load("recent")) != tabled(table)


def test_no_command_signature_is_synthesised() -> None:
    # Every command is a plain Typer function written out by hand (docs/cli.md, "Layout").
    cli = Path(flags.__file__).parent
    for module in cli.glob("*.py"):
        source = module.read_text(encoding="utf-8")
        assert "__signature__" not in source and "inspect.Signature" not in source, module.name
