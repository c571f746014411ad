"""The root options that choose the backend (`--store`, `--endpoint`, `--database`, `--profile`) after the command."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


def test_the_root_options_that_choose_the_backend_are_accepted_after_the_command(run_cli: Cli, tmp_path: Path) -> None:
    other = tmp_path / "other store.db"
    store = Store(other)
    store.write("local", WriteRequest("only in the other store", "ops"))
    store.close()
    for args in (
        ["recent", "-f", "ndjson", "--store", str(other)],  # the start-up fast path
        ["catchup", f"--store={other}", "--no-commit", "-f", "ndjson"],
        ["search", "other", "--store", str(other), "-f", "ndjson"],  # Typer's
    ):
        r = run_cli(*args)
        assert r.code == 0, (args, r.stderr)
        assert [json.loads(line)["content"] for line in r.stdout.splitlines()] == ["only in the other store"]
    # An endpoint given after the command selects it: here the missing key says so (3), not a usage error.
    r = run_cli("recent", "--endpoint", "http://127.0.0.1:9/api/v1")
    assert r.code == 3 and "No such option" not in r.stderr, r.stderr
    named = run_cli("recent", "--profile", "nope")
    assert named.code == 2 and "nope" in named.stderr and "No such option" not in named.stderr
    # A command's own option of the same spelling stays its own: login records what it is given.
    bad = run_cli("login", "--endpoint", "ftp://example.com")
    assert bad.code == 2 and "ftp://example.com" in bad.stderr


@pytest.mark.parametrize("flag", ["--store", "--endpoint", "--database", "--profile"])
def test_a_root_option_after_the_command_without_its_value_says_it_needs_one(run_cli: Cli, flag: str) -> None:
    # Not 'No such option': it is one, accepted there; what is missing is its value, as Click says before the command.
    for args in (["recent", flag], ["search", "x", flag], ["recent", flag, "--", "x"]):
        r = run_cli(*args)
        assert r.code == 2, (args, r.stderr)
        assert f"Option '{flag}' requires an argument" in r.stderr and "No such option" not in r.stderr, r.stderr
