"""Hostile stored text through the installed `mnemo`: no raw control on a terminal, JSON byte-exact (issue 12)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.cli import CliResult
from tests.support.hostile import HOSTILE, HOSTILE_SHOWN, raw_controls

Cli = Callable[..., CliResult]
AGENT = {"MNEMO_AGENT": HOSTILE}


def clean(result: CliResult) -> CliResult:
    assert raw_controls(result.stdout) == set(), result.stdout
    assert raw_controls(result.stderr) == set(), result.stderr
    return result


def test_every_empty_report_names_a_hostile_room_safely(cli: Cli) -> None:
    room = cli("rooms", "create", HOSTILE).stdout.strip()
    cli("rooms", "create", "two\nlines")
    reads = [
        ("recent",),
        ("recent", "--all"),
        ("recent", "--format", "ndjson"),
        ("catchup", "--no-commit"),
        ("catchup", "--format", "ndjson", "--no-commit"),
        ("search", "note"),
        ("search", "note", "--format", "ndjson"),
    ]
    for args in reads:
        result = clean(cli(*args))
        assert result.code == 0, (args, result.stderr)
        both = result.stdout + result.stderr
        assert HOSTILE_SHOWN in both and f"{room}" in both, args
        assert "two⏎lines" in both and "\n  - two\n" not in both, args  # a name cannot forge a line
    # JSON keeps the stored names exact, in the rooms and in the report's text alike.
    for args in (("recent",), ("catchup", "--no-commit")):
        report = json.loads(cli(*args, "--format", "json").stdout)["empty_report"]
        assert [r["name"] for r in report["unsearched_rooms"]] == [HOSTILE, "two\nlines"]
        assert HOSTILE in report["text"]
    # A room's own empty feed, and the hint of a domain named as a room is.
    clean(cli("recent", "--scope", room))
    cli("write", "x", "--scope", "elsewhere")
    result = clean(cli("recent", "--since", "2999-01-01"))
    assert "matches since 2999" in result.stdout and HOSTILE_SHOWN in result.stdout


def test_a_hostile_filter_in_an_empty_report_is_escaped_once(cli: Cli) -> None:
    # The author or query a report names is shown as every stored value is: ESC as \x1b, not repr's \x1b
    # escaped again into \\x1b (what a person who typed a backslash would see); JSON's text stays exact.
    cli("write", "other")
    for args, words in (
        (("recent", "--author", HOSTILE), "by author"),
        (("recent", "--exclude-author", "local", "--author", HOSTILE), "excluding author 'local'"),
        (("search", HOSTILE), "the query"),
    ):
        result = clean(cli(*args))
        assert result.code == 0, (args, result.stderr)
        assert words in result.stdout and f"'{HOSTILE_SHOWN}'" in result.stdout, (args, result.stdout)
    report = json.loads(cli("recent", "--author", HOSTILE, "--format", "json").stdout)["empty_report"]
    assert repr(HOSTILE) in report["text"]


def test_hostile_entries_rooms_agents_and_contexts_in_every_table(cli: Cli) -> None:
    room = cli("rooms", "create", HOSTILE).stdout.strip()
    assert cli("write", HOSTILE, "--scope", room, env=AGENT).code == 0
    assert cli("write", HOSTILE, "--scope", "inj", env=AGENT).code == 0
    assert cli("vault", "add", "tok", "--context", HOSTILE, input="s3cret").code == 0
    for args in (
        ("recent",),
        ("recent", "--scope", "inj"),
        ("recent", "--scope", room),
        ("recent", "--all"),
        ("search", "note"),
        ("search", "note", "--scope", room),
        ("rooms", "list"),
        ("vault", "list"),
        ("catchup",),
    ):
        result = clean(cli(*args, columns=400))
        assert result.code == 0, (args, result.stderr)
        assert HOSTILE_SHOWN in result.stdout, (args, result.stdout)
        # In a pipe a tab separates the values; nothing else raw, and the escaped text whole.
        piped = cli(*args)
        assert raw_controls(piped.stdout, allow="\n\t") == set(), (args, piped.stdout)
        assert HOSTILE_SHOWN in piped.stdout, (args, piped.stdout)
    # The author column (the agent) shows it too, clipped but escaped.
    assert "\\x1b]0" in cli("recent", "--scope", "inj", columns=400).stdout.split("note", 2)[1]
    # Machine formats: byte-exact.
    items = json.loads(cli("recent", "--format", "json").stdout)["items"]
    assert [i["content"] for i in items] == [HOSTILE]
    assert [i["provenance"]["agent_name"] for i in items] == [HOSTILE]
    line = cli("recent", "--scope", room, "--format", "ndjson").stdout
    assert json.loads(line)["content"] == HOSTILE
    hits = json.loads(cli("search", "note", "--scope", room, "--format", "json").stdout)["items"]
    assert [h["content"] for h in hits] == [HOSTILE]
    assert [r["name"] for r in json.loads(cli("rooms", "list", "--format", "json").stdout)] == [HOSTILE]
    secrets = json.loads(cli("vault", "list", "--format", "json").stdout)["secrets"]
    assert [s["context"] for s in secrets] == [HOSTILE]


def test_an_error_quoting_hostile_text_is_one_safe_line(cli: Cli) -> None:
    cli("rooms", "create", HOSTILE)
    result = clean(cli("rooms", "create", HOSTILE))  # the name is taken: the error names it
    assert result.code == 2 and result.stderr.count("\n") == 1 and result.stderr.startswith("mnemo: ")
