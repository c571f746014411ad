"""What a search says about what it covered: the rooms an unscoped search left out, an empty scope, more results."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import listed_rooms

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


def test_empty_unscoped_search_names_the_unsearched_rooms(demo: Any) -> None:
    rooms = listed_rooms(demo)
    assert len(rooms) == 2
    table = demo("search", "zzqqxxnothing")
    assert table.code == 0 and table.stderr == ""
    assert "matches the query 'zzqqxxnothing'" in table.stdout
    for room in rooms:
        assert room["address"] in table.stdout and room["name"] in table.stdout
    assert table.stdout.rstrip().endswith("Re-run with --scope set to one of these addresses to read it.")
    # NDJSON: stdout stays empty, the same report goes to stderr (docs/cli.md common rules).
    nd = demo("search", "zzqqxxnothing", "--format", "ndjson")
    assert nd.code == 0 and nd.stdout == "" and nd.stderr.strip() == table.stdout.strip()
    # JSON keeps its fixed shape.
    js = demo("search", "zzqqxxnothing", "--format", "json")
    assert json.loads(js.stdout) == {"items": [], "query": "zzqqxxnothing", "scope": None} and js.stderr == ""


def test_empty_search_of_an_empty_scope_says_the_scope_is_empty(demo: Any) -> None:
    r = demo("search", "anything", "--scope", "no-such-domain")
    assert r.code == 0 and r.stdout.strip() == "Domain 'no-such-domain' of your own store holds no entries yet."


def test_remote_empty_search_names_rooms_and_flags(remote: Any) -> None:
    r = remote("search", "zzqqxxnothing", "--format", "ndjson")
    assert r.code == 0 and r.stdout == "" and "Re-run with --scope" in r.stderr
    r = remote("rooms", "invite", "build-fleet", "--max-uses", "1001")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --max-uses must be between 1 and 1000, got 1001"


def test_search_says_when_more_results_exist(run_cli: Cli, isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    for n in range(5):
        store.write("local", WriteRequest(f"deploy number {n}"))
    store.close()
    more = run_cli("search", "deploy", "--limit", "3")
    assert more.code == 0 and len(more.stdout.splitlines()) == 3
    assert "More results exist: 3 shown; raise --limit (up to 500)" in more.stderr
    assert "More results" in run_cli("search", "deploy", "-n", "4", "-f", "ndjson").stderr
    every = run_cli("search", "deploy", "--limit", "5")
    assert len(every.stdout.splitlines()) == 5 and "More results" not in every.stderr
    assert len(json.loads(run_cli("search", "deploy", "-n", "3", "-f", "json").stdout)["items"]) == 3
