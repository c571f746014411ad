"""Input a new user gets wrong (issue 35): a repeated ref, a store path that is no store, a name that is not a
room, times as people type them, content over the limit; and the catch-up summary's number."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.catchup.catchup import CatchupResult
from mnemo_tui.cli.feed import _catchup_summary

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


def test_a_repeated_ref_returns_the_first_id_and_says_nothing_was_written(run_cli: Cli) -> None:
    first = run_cli("write", "old text", "--ref", "job-1")
    again = run_cli("write", "new text", "--ref", "job-1")
    assert first.code == again.code == 0
    assert again.stdout == first.stdout and "note: nothing written" in again.stderr
    assert "nothing written" not in first.stderr


def test_a_store_path_that_is_a_folder_or_not_a_store_gets_advice_that_fits(
    run_cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    folder = run_cli("--store", str(tmp_path), "recent")
    assert folder.code == 6 and "is a folder, not a store file" in folder.stderr
    other = tmp_path / "passwd"
    other.write_text("root:x:0:0:root:/root:/bin/bash\n" * 40)  # as long as a real /etc/passwd
    not_store = run_cli("--store", str(other), "recent")
    assert not_store.code == 6 and "is not a mnemo store" in not_store.stderr
    assert other.read_text().startswith("root:")  # untouched
    missing = run_cli("--store", str(tmp_path / "nope" / "store.db"), "recent")
    assert missing.code == 6 and "its folder does not exist" in missing.stderr and "creates it" not in missing.stderr
    absent = run_cli("--store", str(tmp_path / "store.db"), "recent")
    assert absent.code == 6 and "creates it" in absent.stderr


@pytest.mark.parametrize(
    ("repeats", "said"),
    [(1, "1 entry you already had was not shown again"), (3, "3 entries you already had were not shown again")],
)
def test_the_catchup_summary_agrees_in_number(repeats: int, said: str) -> None:
    result = CatchupResult(
        delivered=2,
        pages=1,
        repeats_skipped=repeats,
        resumed=False,
        before=None,
        after=None,
        committed=True,
        since=None,
    )
    assert _catchup_summary(result, "default", utc=True).endswith(said)


def test_a_write_never_resolves_a_name_to_a_room_and_watermarks_resolve_it_as_catchup_does(run_cli: Cli) -> None:
    address = run_cli("rooms", "create", "team-x").stdout.strip()
    assert address.startswith("xroom:room_")
    refused = run_cli("write", "private text", "--scope", "team-x")
    assert refused.code == 2 and f"--scope {address}" in refused.stderr
    assert json.loads(run_cli("recent", "--all", "-f", "json").stdout)["items"] == []  # no own domain was made
    assert run_cli("write", "room text", "--scope", address).code == 0
    caught = json.loads(run_cli("catchup", "--scope", "team-x", "-f", "json").stdout)
    assert caught["scope"] == address and [i["content"] for i in caught["items"]] == ["room text"]
    shown = json.loads(run_cli("watermark", "show", "--scope", "team-x", "-f", "json").stdout)
    assert shown["scope"] == address and shown["created_at"] == caught["watermark"]["after"]["created_at"]
    moved = json.loads(run_cli("watermark", "set", "1h", "--scope", "team-x", "-f", "json").stdout)
    assert moved["scope"] == address
    assert [m["scope"] for m in json.loads(run_cli("watermark", "list", "-f", "json").stdout)] == [address]


@pytest.mark.parametrize("since", ["-1h", "2 days ago", "1d ago", "3 hours ago", "-90s"])
def test_times_as_people_type_them_read_as_spans(run_cli: Cli, since: str) -> None:
    assert run_cli("write", "just written").code == 0
    got = run_cli("recent", "--since", since, "-f", "ndjson")
    assert got.code == 0 and [json.loads(x)["content"] for x in got.stdout.splitlines()] == ["just written"]


def test_a_month_is_refused_not_read_as_a_minute(run_cli: Cli) -> None:
    got = run_cli("recent", "--since", "1M")
    assert got.code == 2 and "minutes are `m`; months are not a span here" in got.stderr


def test_content_over_the_limit_is_refused_with_the_length_given(run_cli: Cli) -> None:
    refused = run_cli("write", "-", input="x" * 10_001)
    assert refused.code == 2 and "content must be 1 to 10000 characters, got 10001" in refused.stderr


def test_blank_environment_values_count_as_unset(run_cli: Any) -> None:
    env = {"MNEMO_PRINCIPAL": "  ", "MNEMO_CONSUMER": " ", "MNEMO_AGENT": " "}
    status = json.loads(run_cli("status", "--format", "json", env=env).stdout)
    assert status["principal"] == "local" and status["consumer"] == "default"
    assert run_cli("write", "blank env", env=env).code == 0
    item = json.loads(run_cli("recent", "--format", "json").stdout)["items"][0]
    assert item["content"] == "blank env" and item["provenance"]["principal"] == "local"
    assert item["provenance"].get("agent") is None
