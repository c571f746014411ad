"""A room given by its name as a scope, and a room shown with its name beside its address."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.cli import listed_rooms

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


@pytest.mark.parametrize(
    "args",
    [
        ["recent", "--scope", "build-fleet"],
        ["recent", "--scope", "build-fleet", "--format", "ndjson"],
        ["recent", "--scope", "build-fleet", "--all", "--format", "json"],
        ["catchup", "--scope", "build-fleet", "--format", "ndjson"],
        ["search", "x", "--scope", "build-fleet"],
    ],
)
def test_a_scope_named_like_one_room_and_no_domain_reads_the_room(demo: Any, args: list[str]) -> None:
    address = next(r["address"] for r in listed_rooms(demo) if r["name"] == "build-fleet")
    r = demo(*args)
    assert r.code == 0
    note = f"(Your own store has no domain 'build-fleet': reading your room of that name, --scope {address})"
    assert r.stderr.splitlines()[0] == note and note not in r.stdout
    assert "holds no entries" not in r.stdout + r.stderr
    if args[0] != "search":
        assert r.stdout.strip()  # the room's entries


def test_no_room_hint_for_a_domain_no_room_is_named_after(demo: Any) -> None:
    r = demo("recent", "--scope", "not-a-room")
    assert r.code == 0 and r.stderr == ""


def test_a_room_is_shown_with_its_name_beside_its_id(run_cli: Cli) -> None:
    address = run_cli("rooms", "create", "ops-room").stdout.strip()
    empty = run_cli("recent", "--scope", address)
    assert f"Room 'ops-room' ({address}) holds no entries yet." in empty.stdout
    assert run_cli("watermark", "set", "--scope", address, "1h").code == 0
    listed = run_cli("watermark", "list").stdout.splitlines()[1]
    assert f"{address} (ops-room)" in listed
    assert f"{address} (ops-room)" in run_cli("watermark", "show", "--scope", address).stdout
    assert (
        json.loads(run_cli("watermark", "list", "-f", "json").stdout)[0]["scope"] == address
    )  # JSON as docs/cli.md says
    report = json.loads(run_cli("recent", "--scope", address, "-f", "json").stdout)["empty_report"]
    assert report["scope"] == address and "'ops-room'" in report["text"]
