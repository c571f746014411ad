"""Tests that what `mnemo`'s root, `recent` and `catchup` parsed is a `Value` of exactly the options of its table in
`flags.py`, whichever way in (the start-up fast path or Typer) parsed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import cli
from mnemo_tui.cli import feed, flags, options
from mnemo_tui.values.model import Value

OPTIONS_OF = [
    (flags.ROOT, options.RootOptions),
    (flags.RECENT, options.RecentOptions),
    (flags.CATCHUP, options.CatchupOptions),
]


@pytest.mark.parametrize(("table", "parsed_as"), OPTIONS_OF)
def test_the_options_value_has_the_fields_of_its_table(table: dict[str, flags.Flag], parsed_as: type[Value]) -> None:
    assert parsed_as._fields == tuple(table)


@pytest.mark.parametrize(("table", "parsed_as"), OPTIONS_OF)
def test_a_value_of_the_options_given_is_immutable_and_compares_by_its_fields(
    table: dict[str, flags.Flag], parsed_as: type[Value]
) -> None:
    parsed = cli._values(parsed_as, table, {})  # type: ignore[type-var]
    assert parsed == cli._values(parsed_as, table, {}) and [getattr(parsed, n) for n in table] == [
        f.default for f in table.values()
    ]
    with pytest.raises(AttributeError):
        parsed.anything_else = 1  # type: ignore[attr-defined]  # slots: no option outside the table


@pytest.mark.parametrize("fast", [True, False])
def test_both_ways_in_hand_the_command_the_same_options(
    fast: bool, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    seen: list[Any] = []

    def recent(c: Any, args: options.RecentOptions) -> int:
        seen.append((c.root, args))
        return 0

    monkeypatch.setattr(feed, "recent", recent)
    argv = ["--utc", "recent", "--limit", "3", "--scope", "notes"]
    code = cli._fast(argv) if fast else cli._typer(argv)
    assert code == 0 and len(seen) == 1
    root, args = seen[0]
    assert isinstance(root, options.RootOptions) and root.utc and root.store is None
    assert args == options.RecentOptions(
        **{n: f.default for n, f in flags.RECENT.items()} | {"limit": 3, "scope": "notes"}
    )
