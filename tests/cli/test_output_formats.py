"""The entry table on a terminal and the tab-separated rows a pipe gets (docs/cli.md, Output)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import timefmt
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import listed_rooms

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


LONG = "disk full on db-2 " + "word " * 60 + "\tafter a tab\nand a second line"


def test_a_piped_table_carries_whole_values_tab_separated(run_cli: Cli, isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    noon_utc = timefmt.parse_iso("2026-11-20T12:00:00.250000Z")
    store.bulk_insert([("local", WriteRequest(LONG, domain="a-rather-long-domain-name-here"), noon_utc)])
    store.bulk_insert([("local", WriteRequest("short one", domain="ops"), noon_utc + 1_000_000)])
    store.close()
    items = json.loads(run_cli("recent", "-f", "json").stdout)["items"]
    ids = [i["atom_id"] for i in items]
    for args in (["recent"], ["recent", "--all"], ["catchup", "--no-commit"], ["search", "disk"]):
        piped = run_cli(*args, env={"TZ": "America/New_York", "COLUMNS": "40"})
        assert piped.code == 0, piped.stderr
        rows = [line.split("\t") for line in piped.stdout.splitlines()]
        assert all(len(row) == 5 for row in rows), (args, piped.stdout)  # no header, one line per entry
        by_id = {row[4]: row for row in rows}
        assert set(by_id) == set(ids) or (args[0] == "search" and set(by_id) == {ids[1]}), args
        when, author, domain, content, _ = by_id[ids[1]]
        assert when == "2026-11-20T07:00:00.250000-05:00"  # local, with its offset
        assert (author, domain) == ("local", "a-rather-long-domain-name-here")
        assert content == LONG.replace("\t", "\\x09").replace("\n", "⏎")  # whole: no cut, no padding
        assert "…" not in piped.stdout and "  " not in piped.stdout.replace("word  ", "")
    utc = run_cli("recent", "--utc", env={"TZ": "Asia/Kolkata"}).stdout.splitlines()
    assert utc[1].startswith("2026-11-20T12:00:00.250000Z\t")  # the wire's spelling of UTC, never +00:00
    # `grep` finds what `--format ndjson | grep` finds: the words past where a terminal row is cut.
    assert "second line" in run_cli("recent").stdout


def test_a_piped_list_is_not_clipped(run_cli: Cli) -> None:
    context = "a very long context sentence " * 10
    assert run_cli("vault", "add", "long.ctx", "--context", context, input="value\n").code == 0
    piped = run_cli("vault", "list", env={"COLUMNS": "60"})
    assert context.strip() in piped.stdout and "…" not in piped.stdout


def test_recent_table_gives_the_content_the_room_short_columns_leave(cli: Any) -> None:
    text = "The quick brown fox jumps over the dog."  # 39 characters
    assert cli("write", text, "--scope", "ci").code == 0
    r = cli("recent", columns=80)
    header, row = r.stdout.splitlines()
    assert header.split() == ["WHEN", "AUTHOR", "DOMAIN", "CONTENT"]
    assert text in row and len(row) <= 80  # was clipped to 21 characters behind 18- and 16-wide columns


@pytest.mark.parametrize("command", [["recent"], ["catchup"], ["search", "the"]])
def test_a_room_table_has_no_domain_column_repeating_its_address(demo: Any, cli: Cli, command: list[str]) -> None:
    address = listed_rooms(demo)[0]["address"]
    r = cli(*command, "--scope", address, columns=120)  # the same store, its table on a terminal
    assert r.code == 0
    header, *rows = r.stdout.splitlines()
    assert rows and header.split() == ["WHEN", "AUTHOR", "CONTENT"]
    assert not [row for row in rows if "xroom:" in row]
    own = cli("recent", columns=120)
    assert "DOMAIN" in own.stdout.splitlines()[0]
