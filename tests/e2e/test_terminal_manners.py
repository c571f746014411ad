"""The CLI's manners in a real terminal, through the installed console script: pager, reading order,
widths in cells, local time, typos that fail loudly, conventions (version, help, completion, editor)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import sanitize, timefmt
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO, fill, in_terminal, recorder

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


# -- 1. the pager and the reading order ----------------------------------------------------------


def test_a_terminal_pages_through_mnemo_pager_and_a_pipe_or_no_pager_never_does(
    cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    ids = fill(isolated_home, 60)
    pager, seen = recorder(tmp_path, "pager")
    shown = in_terminal(isolated_home, ["recent", "--all"], env={"MNEMO_PAGER": pager, "PAGER": "false"})
    paged = seen.read_text()
    assert paged.splitlines()[0].startswith("WHEN") and len(paged.splitlines()) == 61
    assert "entry 59" in paged and "entry 59" not in shown  # the rows went to the pager, not the screen
    seen.unlink()
    direct = in_terminal(isolated_home, ["recent", "--all", "--no-pager"], env={"MNEMO_PAGER": pager})
    assert not seen.exists() and "entry 59" in direct
    for machine in (["recent", "--all", "-f", "ndjson"], ["recent", "-f", "json"]):
        in_terminal(isolated_home, machine, env={"MNEMO_PAGER": pager})
        assert not seen.exists()
    piped = cli("recent", "--all", env={"MNEMO_PAGER": pager})
    assert piped.code == 0 and not seen.exists() and len(piped.stdout.splitlines()) == 60  # no header in a pipe
    # PAGER is used when MNEMO_PAGER is not set; the newest first unless --reverse.
    in_terminal(isolated_home, ["catchup", "--reverse"], env={"PAGER": pager})
    rows = seen.read_text().splitlines()[1:]
    assert [r.split()[-1] for r in rows] == [i[:8] for i in ids]  # oldest first
    assert json.loads(cli("watermark", "show", "-f", "json").stdout)["created_at"] is not None


def test_reverse_prints_oldest_first_in_every_format_and_follow_refuses_it(cli: Cli, isolated_home: Path) -> None:
    ids = fill(isolated_home, 7)
    page = cli("recent", "--limit", "3", "--reverse", "-f", "ndjson")
    assert [json.loads(line)["atom_id"] for line in page.stdout.splitlines()] == ids[-3:]
    every = cli("recent", "--all", "--reverse", "-f", "json")
    assert [i["atom_id"] for i in json.loads(every.stdout)["items"]] == ids
    table = cli("recent", "--all", "--reverse", "--limit", "2", columns=100)
    assert [r.split()[-1] for r in table.stdout.splitlines()[1:]] == [i[:8] for i in ids]
    caught = cli("catchup", "--reverse", "--limit", "2", "-f", "ndjson")
    assert [json.loads(line)["atom_id"] for line in caught.stdout.splitlines()] == ids
    assert cli("catchup", "-f", "json").stdout.count('"atom_id"') == 0  # the reversed pass committed
    refused = cli("recent", "--follow", "--reverse")
    assert refused.code == 2 and "--reverse" in refused.stderr


# -- 2. room for the content, measured in cells --------------------------------------------------

WIDE = "🚀 👍🏽 👨\u200d👩\u200d👧 日本語のテキスト e\u0301 " * 6


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_rows_with_wide_characters_never_overflow_the_terminal(cli: Cli, isolated_home: Path, columns: int) -> None:
    fill(isolated_home, 3, domain="général-✨", agent="робот-🤖", agent_name="робот-🤖")
    assert cli("rooms", "create", "会議室-🚀-" + "広" * 40).code == 0
    # A room's address is never clipped (it is there to be copied): its listing needs 64 columns.
    for args in (["recent"], ["recent", "--wide"], *([["rooms", "list"]] if columns >= 80 else [])):
        r = cli(*args, columns=columns)
        for line in r.stdout.splitlines():
            assert sanitize.cells(line) <= columns, (columns, line)
    store = Store(isolated_home / "store.db")
    store.write("local", WriteRequest(WIDE, domain="général-✨"))
    store.close()
    for args in (["recent"], ["recent", "--wide"]):
        r = cli(*args, columns=columns)
        assert r.code == 0
        assert all(sanitize.cells(line) <= columns for line in r.stdout.splitlines()), r.stdout


def test_cells_count_wide_characters_twice_and_marks_not_at_all() -> None:
    assert sanitize.cells("abc") == 3
    assert sanitize.cells("日本") == 4 and sanitize.cells("🚀") == 2
    assert sanitize.cells("e\u0301") == 1  # a combining accent takes no cell of its own
    assert sanitize.cells("❤\ufe0f") == 2  # the emoji form of a narrow symbol is wide
    clipped = sanitize.clip("日本語のテキスト", 7)
    assert clipped == "日本語…" and sanitize.cells(clipped) <= 7


def test_the_content_gets_the_room_and_wide_wraps_it_whole(cli: Cli, isolated_home: Path) -> None:
    long = "alpha " * 40 + "omega\nsecond line of it"
    store = Store(isolated_home / "store.db")
    store.write("local", WriteRequest(long.strip(), domain="ops"))
    store.close()
    header, row = cli("recent", columns=120).stdout.splitlines()[:2]
    content_from = header.index("CONTENT")
    assert content_from <= 40  # a compact when column, the author and the domain leave the rest
    assert len(row) <= 120 and row.rstrip().endswith(row.split()[-1]) and "…" in row
    wide = cli("recent", "--wide", columns=80).stdout.splitlines()
    assert len(wide) > 3 and all(len(line) <= 80 for line in wide)
    assert "omega" in "".join(wide) and "second line of it" in wide[-1]
    under = wide[0].index("CONTENT")
    assert all(line.startswith(" " * under) and line[under] != " " for line in wide[2:])  # under the content


# -- 3. local time ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("zone", "offset_hours"), [("America/New_York", -5), ("Asia/Kolkata", 5.5)])
def test_wall_clock_times_are_local_unless_utc(cli: Cli, isolated_home: Path, zone: str, offset_hours: float) -> None:
    store = Store(isolated_home / "store.db")
    noon_utc = timefmt.parse_iso("2026-11-20T12:00:00Z")
    store.bulk_insert([("local", WriteRequest("at noon utc"), noon_utc)])
    store.close()
    env = {"TZ": zone}
    local_noon = noon_utc + int(offset_hours * 3600) * 1_000_000
    shown = timefmt.to_iso(local_noon)  # the wall clock there, spelled as if it were UTC
    day, clock = shown[:10], shown[11:16]
    table = cli("recent", env=env, columns=120).stdout
    assert f"Nov {int(day[8:]):2d} {clock}" in table and "WHEN" in table.splitlines()[0]
    utc_table = cli("recent", "--utc", env=env, columns=120).stdout
    assert "Nov 20 12:00" in utc_table and "WHEN (UTC)" in utc_table
    wire = json.loads(cli("recent", "-f", "json", env=env).stdout)["items"][0]
    assert wire["created_at"] == "2026-11-20T12:00:00.000000Z"  # JSON stays UTC
    # A naive time and a bare date are local: the entry is inside its local day, outside the neighbour.
    assert cli("recent", "--since", day, "--until", day, "-f", "ndjson", env=env).stdout.count("at noon utc") == 1
    inside = f"{day}T{clock}"
    assert cli("recent", "--since", inside, "--until", inside + ":00.000000", "-f", "ndjson", env=env).stdout
    assert not cli("recent", "--since", inside, "--until", inside, "--utc", "-f", "ndjson", env=env).stdout
    (isolated_home / "config.toml").write_text("utc = true\n")
    assert "WHEN (UTC)" in cli("recent", env=env, columns=120).stdout


def test_a_bare_clock_time_is_today_on_the_local_clock() -> None:
    now = timefmt.parse_iso("2026-12-01T12:00:00Z")
    assert timefmt.to_iso(timefmt.parse_time("09:30", now=now, utc=True)) == "2026-12-01T09:30:00.000000Z"
    with pytest.raises(Exception, match="not a time"):
        timefmt.parse_time("25:00", now=now)


# -- 4. typos fail loudly ----------------------------------------------------------------------


def test_no_read_creates_a_store_and_a_named_missing_store_is_exit_6(
    cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nope" / "x.db"
    for args in (["recent"], ["catchup"], ["search", "x"], ["rooms", "list"], ["verify", "--expect", "-"]):
        r = cli("--store", str(missing), *args, input="00000000-0000-4000-8000-000000000000\n")
        assert r.code == 6 and str(missing) in r.stderr and "--store" in r.stderr, (args, r.stderr)
    r = cli("recent", env={"MNEMO_STORE": str(missing)})
    assert r.code == 6 and "MNEMO_STORE" in r.stderr
    assert "(named by --store, does not exist)" in cli("--store", str(missing), "status").stdout
    assert not missing.parent.exists()
    # The default store, missing, reads as empty and is not created by any read.
    for args in (["recent"], ["catchup"], ["recent", "--all", "-f", "json"], ["rooms", "list"], ["search", "x"]):
        r = cli(*args)
        assert r.code == 0, (args, r.stderr)
    assert "holds no entries yet" in cli("recent").stdout
    assert not (isolated_home / "store.db").exists()
    # A write creates it (a named store's folder must exist: a typo there is not a new folder).
    assert cli("--store", str(missing), "write", "x").code == 6 and not missing.parent.exists()
    assert cli("write", "first").code == 0 and (isolated_home / "store.db").exists()


def test_a_near_domain_or_room_is_suggested_and_a_room_name_reads_that_room(cli: Cli) -> None:
    assert cli("write", "disk full on db-2", "--scope", "ops").code == 0
    typo = cli("recent", "--scope", "opss")
    assert typo.code == 0 and "Did you mean domain 'ops'? --scope ops" in typo.stderr
    address = cli("rooms", "create", "design-review").stdout.strip()
    assert cli("write", "mockups v2 are up", "--scope", address).code == 0
    by_name = cli("recent", "--scope", "design-review", "-f", "ndjson")
    assert [json.loads(line)["content"] for line in by_name.stdout.splitlines()] == ["mockups v2 are up"]
    assert f"--scope {address}" in by_name.stderr
    near_room = cli("recent", "--scope", "design-reveiw")
    assert f"Did you mean room 'design-review'? --scope {address}" in near_room.stderr
    caught = cli("catchup", "--scope", "design-review", "-f", "json")
    assert json.loads(caught.stdout)["scope"] == address
    shouted = cli("recent", "--scope", address.upper().replace("ROOM_", "room_", 1))
    assert shouted.code == 2 and "lower case" in shouted.stderr


def test_a_near_domain_with_a_space_is_suggested_as_a_pasteable_option(cli: Cli) -> None:
    # As the author hint does: the suggested --scope is a shell word, not 'code' and a stray 'review'.
    assert cli("write", "cr entry", "--scope", "code review").code == 0
    typo = cli("recent", "--scope", "code reviw")
    assert "Did you mean domain 'code review'? --scope 'code review'" in typo.stderr, typo.stderr


def test_authors_are_matched_as_the_author_column_shows_them(cli: Cli) -> None:
    for agent, content in (("build-bot", "nightly green"), ("planner", "sprint goal"), ("build-bot", "flaky test")):
        assert cli("write", content, env={"MNEMO_AGENT": agent}).code == 0
    assert cli("write", "by hand").code == 0
    table = cli("recent", columns=100).stdout
    assert "local/build-bot" in table

    def contents(*args: str) -> list[str]:
        return [json.loads(line)["content"] for line in cli("recent", *args, "-f", "ndjson").stdout.splitlines()]

    assert contents("--exclude-author", "local/build-bot") == ["by hand", "sprint goal"]
    assert contents("--author", "local/build-bot") == ["flaky test", "nightly green"]
    assert contents("--author", "local") == ["by hand", "flaky test", "sprint goal", "nightly green"]
    assert contents("--exclude-author", "local") == []
    blank = cli("recent", "--author", " ")
    assert blank.code == 2 and "--author must not be blank" in blank.stderr


def test_an_unknown_config_key_is_a_warning_naming_the_nearest_known_one(cli: Cli, isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text('consumr = "me"\n\n[profiles.work]\nendpiont = "http://x"\n')
    r = cli("recent")
    assert r.code == 0
    assert "unknown key 'consumr' is ignored (did you mean consumer?)" in r.stderr
    assert "[profiles.work] unknown key 'endpiont' is ignored (did you mean endpoint?)" in r.stderr


# -- 6. room delete ------------------------------------------------------------------------------


def test_rooms_delete_asks_on_a_terminal_needs_yes_elsewhere_and_is_owner_only(cli: Cli, isolated_home: Path) -> None:
    address = cli("rooms", "create", "scratch").stdout.strip()
    assert cli("write", "in the room", "--scope", address).code == 0
    code = cli("rooms", "invite", address).stdout.strip()
    assert cli("rooms", "join", code, env={"MNEMO_PRINCIPAL": "bob"}).code == 0
    refused = cli("rooms", "delete", address)
    assert refused.code == 2 and "--yes" in refused.stderr
    member = cli("rooms", "delete", address, "--yes", env={"MNEMO_PRINCIPAL": "bob"})
    assert member.code == 4 and "owner" in member.stderr
    shown = in_terminal(isolated_home, ["rooms", "delete", "scratch"], typed="n\n")  # asked on the terminal
    assert "Delete room scratch" in shown and "nothing deleted" in shown
    done = cli("rooms", "delete", "scratch", "--yes", "-f", "json")
    assert done.code == 0 and json.loads(done.stdout) == {
        "room_id": address.removeprefix("xroom:"),
        "address": address,
        "deleted": 1,
        "status": "deleted",
    }
    assert json.loads(cli("rooms", "list", "-f", "json").stdout) == []
    assert cli("recent", "--scope", address, env={"MNEMO_PRINCIPAL": "bob"}).code == 4


# -- 8. the conventions people reach for ---------------------------------------------------------


def test_version_short_help_and_bash_completion(cli: Cli) -> None:
    from mnemo_tui import __version__

    assert cli("--version").stdout == f"mnemo {__version__}\n"
    assert cli("-h").stdout == cli("--help").stdout and "Usage: mnemo" in cli("-h").stdout
    assert "Usage: mnemo rooms delete" in cli("rooms", "delete", "-h").stdout
    # Typer detects the shell from the process tree: run it from bash, as a person would.
    script = subprocess.run(
        ["bash", "-c", f"{MNEMO} --show-completion; exit $?"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "complete -o default -F _mnemo_completion mnemo" in script
    env = {"COMP_WORDS": "mnemo rec", "COMP_CWORD": "1", "_MNEMO_COMPLETE": "complete_bash"}
    assert cli(env=env).stdout.split() == ["recent"]
    env = {"COMP_WORDS": "mnemo recent --sc", "COMP_CWORD": "2", "_MNEMO_COMPLETE": "complete_bash"}
    assert cli(env=env).stdout.split() == ["--scope"]


def test_write_alone_on_a_terminal_opens_the_editor_and_keeps_what_is_above_the_scissors(
    cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text(
        '#!/bin/sh\ncp "$1" "$1.before"\n{ printf "# Heading\\nwritten in the editor\\n"; cat "$1.before"; } > "$1"\n'
    )
    editor.chmod(0o755)
    shown = in_terminal(isolated_home, ["write", "--scope", "notes"], env={"EDITOR": str(editor), "VISUAL": ""})
    atom = shown.strip().splitlines()[-1]
    entry = json.loads(cli("show", atom, "-f", "json").stdout)["item"]
    assert entry["content"] == "# Heading\nwritten in the editor"  # a heading is content; the help is not
    empty = tmp_path / "empty.sh"
    empty.write_text('#!/bin/sh\n: > "$1"\n')
    empty.chmod(0o755)
    out = in_terminal_failing(isolated_home, ["write"], env={"EDITOR": str(empty)})
    assert "empty: nothing stored" in out
    assert len(json.loads(cli("recent", "-f", "json").stdout)["items"]) == 1


def test_a_write_from_the_editor_that_fails_keeps_the_text_in_a_private_file(
    cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "a long thought\\nworth keeping\\n" > "$1"\n')
    editor.chmod(0o755)
    # The editor is done before the unknown id it supersedes is refused: the text must not go with the refusal.
    out = in_terminal_failing(isolated_home, ["write", "--supersedes", "deadbeef00"], env={"EDITOR": str(editor)})
    found = re.search(r"your text is kept in (\S+\.md)", out)
    assert found, out
    kept = Path(found.group(1))
    assert kept.read_text() == "a long thought\nworth keeping\n"
    assert kept.stat().st_mode & 0o777 == 0o600 and kept.parent.stat().st_mode & 0o077 == 0
    assert json.loads(cli("recent", "-f", "json").stdout)["items"] == []


def in_terminal_failing(home: Path, args: list[str], env: dict[str, str]) -> str:
    try:
        in_terminal(home, args, env=env)
    except AssertionError as exc:
        return str(exc)
    raise AssertionError("the command succeeded")


@pytest.mark.parametrize("columns", ["99999999999999999999", "1000000000000"])
def test_an_absurd_columns_value_lays_the_table_out_at_a_bounded_width(isolated_home: Path, columns: str) -> None:
    # Not 'internal error: OverflowError' (exit 5), nor a row padded to a trillion cells.
    fill(isolated_home, 1)
    shown = in_terminal(isolated_home, ["recent", "--no-pager"], env={"COLUMNS": columns})
    assert "entry 0" in shown and max(len(line) for line in shown.splitlines()) <= 10_000


def test_json_is_indented_on_a_terminal_and_compact_in_a_pipe(cli: Cli, isolated_home: Path) -> None:
    fill(isolated_home, 1, domain="ops")
    piped = cli("status", "-f", "json").stdout
    assert piped.count("\n") == 1
    shown = in_terminal(isolated_home, ["status", "-f", "json"])
    assert shown.startswith("{\n  ") and json.loads(shown) == json.loads(piped)


def test_messages_use_no_internal_words(cli: Cli, isolated_home: Path) -> None:
    fill(isolated_home, 3)
    first = cli("catchup")
    assert "3 new entries for consumer 'default' in 1 page" in first.stderr
    assert "page(s)" not in first.stderr and "repeat" not in first.stderr
    marks = cli("watermark", "list").stdout
    assert "BOUNDARY" not in marks and "ENTRIES AT IT" in marks
    help_text = "".join(cli(*c, "--help").stdout for c in (["serve"], ["recent"], ["catchup"], []))
    assert ".md" not in help_text.replace("docs/server.md", "")
