"""What people of gh, git and journalctl habits expect (issue 36), each through the installed console script."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import timefmt
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest

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


@pytest.mark.parametrize("args", [["recent", "-f"], ["recent", "-f", "--all"], ["--utc", "recent", "-n", "5", "-f"]])
def test_recent_f_without_a_format_points_to_follow(run_cli: Cli, args: list[str]) -> None:
    r = run_cli(*args)
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == (
        "mnemo: -f is --format here and needs a value (table, json or ndjson); did you mean -F (follow)?\n"
    )
    assert run_cli("recent", "-f", "ndjson").code == 0  # -f stays --format
    assert "did you mean -F" not in run_cli("rooms", "list", "-f").stderr  # only where following exists


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


def test_bare_mnemo_prints_the_help_and_exits_0(run_cli: Cli) -> None:
    for args in ([], ["rooms"]):
        r = run_cli(*args)
        assert r.code == 0 and r.stderr == "", r.stderr
        assert (
            r.stdout.startswith(f"Usage: mnemo {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
            and "Commands:" in r.stdout
        )
    assert "recent" in run_cli().stdout


def test_check_help_says_what_it_checks(run_cli: Cli) -> None:
    from mnemo_tui.proof.checks import CHECK_NAMES

    shown = run_cli("check", "--help").stdout
    assert "source document" not in shown
    assert all(name in shown for name in CHECK_NAMES)
    assert "source document" not in run_cli("--help").stdout


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


def test_an_author_given_as_the_agent_alone_suggests_the_form_that_matches(run_cli: Cli) -> None:
    for agent in ("build-bot", "planner"):
        assert run_cli("write", f"by {agent}", env={"MNEMO_AGENT": agent}).code == 0
    for args in (["recent", "--author", "build-bot"], ["recent", "--author", "Build-Bot", "--all", "-f", "ndjson"]):
        r = run_cli(*args)
        assert r.code == 0 and "by build-bot" not in r.stdout
        assert "Did you mean author 'local/build-bot'? --author local/build-bot" in r.stderr, r.stderr
        assert "planner" not in r.stderr
    suggested = run_cli("recent", "--author", "local/build-bot", "-f", "ndjson")
    assert [json.loads(line)["content"] for line in suggested.stdout.splitlines()] == ["by build-bot"]
    assert "Did you mean author" not in run_cli("recent", "--author", "nobody").stderr


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


def _complete(cli: Cli, *words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash completion offers for the last of `words` (an empty last word: after a space)."""
    line = {"COMP_WORDS": " ".join(words), "COMP_CWORD": str(len(words) - 1), "_MNEMO_COMPLETE": "complete_bash"}
    r = cli(env={**line, **(env or {})})
    assert r.code == 0 and r.stderr == "", r.stderr
    return r.stdout.split()


def test_values_complete_from_local_state_only(run_cli: Cli, isolated_home: Path) -> None:
    import socket

    assert _complete(run_cli, "mnemo", "recent", "--format", "") == ["table", "json", "ndjson"]
    assert _complete(run_cli, "mnemo", "rooms", "list", "-f", "") == ["table", "json"]
    assert _complete(run_cli, "mnemo", "catchup", "--consumer", "") == ["default"]  # the configured one
    assert not (isolated_home / "state.db").exists() and not (isolated_home / "store.db").exists()
    assert run_cli("write", "x", "--scope", "ops").code == 0 and run_cli("write", "y", "--scope", "ci").code == 0
    address = run_cli("rooms", "create", "design").stdout.strip()
    assert _complete(run_cli, "mnemo", "recent", "--scope", "") == sorted(["ci", "design", "ops", address])
    assert _complete(run_cli, "mnemo", "search", "q", "-s", "o") == ["ops"]
    assert run_cli("catchup", "--consumer", "nightly", "--scope", "ops").code == 0
    assert _complete(run_cli, "mnemo", "watermark", "show", "-c", "") == ["default", "nightly"]
    # An endpoint is never contacted and no key is asked for: its scopes are those its watermarks name.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}/api/v1"
        assert _complete(run_cli, "mnemo", "--endpoint", endpoint, "recent", "--scope", "") == []
        assert _complete(run_cli, "mnemo", "--endpoint", endpoint, "catchup", "-c", "n") == ["nightly"]
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_vault_add_asks_for_a_missing_context_on_a_terminal(cli: Cli, isolated_home: Path) -> None:
    from tests.support.cli import in_terminal
    from tests.support.keyrings import subprocess_env

    env = subprocess_env(isolated_home / "test-keyring.json")
    turns = [("shown in listings)? ", "token of the deploy bot\n"), ("(hidden): ", "s3cret\n")]
    shown = in_terminal(isolated_home, ["vault", "add", "deploy"], env=env, turns=turns)
    assert "What is deploy for (its --context, shown in listings)?" in shown and "s3cret" not in shown
    secrets = json.loads(cli("vault", "list", "-f", "json").stdout)["secrets"]
    assert [(s["alias"], s["context"]) for s in secrets] == [("deploy", "token of the deploy bot")]
    assert cli("vault", "get", "deploy").stdout == "s3cret\n"
    piped = cli("vault", "add", "other", input="v\n")  # no terminal to ask on: the usage error
    assert piped.code == 2 and "Missing option '--context'" in piped.stderr
