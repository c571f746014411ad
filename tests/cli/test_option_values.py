"""Tests that what `mnemo`'s root, `recent` and `catchup` parsed is a `Value` of exactly the options of its table in
`flags.py`, whichever way in (the start-up fast path or Typer) parsed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import cli
from mnemo_tui.cli import feed, flags
from mnemo_tui.values.model import Value

OPTIONS = [
    (flags.ROOT, flags.RootOptions),
    (flags.RECENT, flags.RecentOptions),
    (flags.CATCHUP, flags.CatchupOptions),
]


@pytest.mark.parametrize(("table", "options"), OPTIONS)
def test_the_options_value_has_the_fields_of_its_table(table: dict[str, flags.Flag], options: type[Value]) -> None:
    assert options._fields == tuple(table)


@pytest.mark.parametrize(("table", "options"), OPTIONS)
def test_a_value_of_the_options_given_is_immutable_and_compares_by_its_fields(
    table: dict[str, flags.Flag], options: type[Value]
) -> None:
    parsed = cli._values(options, table, {})  # type: ignore[type-var]
    assert parsed == cli._values(options, table, {}) and [getattr(parsed, n) for n in table] == [
        f.default for f in table.values()
    ]
    with pytest.raises(AttributeError):
        parsed.anything_else = 1  # type: ignore[attr-defined]  # slots: no option outside the table


@pytest.mark.parametrize("fast", [True, False])
def test_both_ways_in_hand_the_command_the_same_options(
    fast: bool, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    seen: list[Any] = []

    def recent(c: Any, args: flags.RecentOptions) -> int:
        seen.append((c.root, args))
        return 0

    monkeypatch.setattr(feed, "recent", recent)
    argv = ["--utc", "recent", "--limit", "3", "--scope", "notes"]
    code = cli._fast(argv) if fast else cli._typer(argv)
    assert code == 0 and len(seen) == 1
    root, args = seen[0]
    assert isinstance(root, flags.RootOptions) and root.utc and root.store is None
    assert args == flags.RecentOptions(
        **{n: f.default for n, f in flags.RECENT.items()} | {"limit": 3, "scope": "notes"}
    )
