"""End-to-end tests of `mnemo recent`, `catchup`, `write` and `search` through the installed console script."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from mnemo_tui import timefmt
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest

Cli = Callable[..., "object"]


def seed(home: Path, count: int, domain: str = "general", principal: str = "local") -> list[str]:
    """Write `count` entries into the default store of MNEMO_HOME; returns their ids, oldest first."""
    store = Store(home / "store.db")
    try:
        return [
            store.write(principal, WriteRequest(f"entry {i} in {domain}", domain, ("t",), agent="bot")).atom_id
            for i in range(count)
        ]
    finally:
        store.close()


def lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_recent_ndjson_prints_items_newest_first_and_the_cursor_on_stderr(run_cli, isolated_home: Path) -> None:
    ids = seed(isolated_home, 5)
    r = run_cli("recent", "--limit", "3", "--format", "ndjson")
    assert r.code == 0, r.stderr
    items = lines(r.stdout)
    assert [i["atom_id"] for i in items] == ids[::-1][:3]
    assert set(items[0]) == {"atom_id", "content", "domain", "created_at", "concepts", "provenance"}
    assert items[0]["provenance"]["principal"] == "local"  # type: ignore[index]
    assert str(items[0]["created_at"]).endswith("Z")
    cursor_lines = [x for x in r.stderr.splitlines() if x.startswith("next_cursor: ")]
    assert len(cursor_lines) == 1
    cursor = cursor_lines[0].removeprefix("next_cursor: ")
    rest = run_cli("recent", "--limit", "3", "--format", "ndjson", "--cursor", cursor)
    assert [i["atom_id"] for i in lines(rest.stdout)] == ids[::-1][3:]
    assert "next_cursor" not in rest.stderr


def test_recent_json_has_the_documented_shape(run_cli, isolated_home: Path) -> None:
    ids = seed(isolated_home, 3)
    r = run_cli("recent", "-n", "2", "-f", "json")
    doc = json.loads(r.stdout)
    assert set(doc) == {"items", "next_cursor", "scope", "empty_report"}
    assert [i["atom_id"] for i in doc["items"]] == ids[::-1][:2]
    assert doc["scope"] is None and doc["empty_report"] is None and doc["next_cursor"]
    last = json.loads(run_cli("recent", "-n", "2", "-f", "json", "--cursor", doc["next_cursor"]).stdout)
    assert [i["atom_id"] for i in last["items"]] == ids[:1] and last["next_cursor"] is None


def test_recent_all_streams_every_item_and_ends_with_a_null_cursor(run_cli, isolated_home: Path) -> None:
    ids = seed(isolated_home, 45)
    r = run_cli("recent", "--all", "--format", "ndjson", "--limit", "7")
    assert [i["atom_id"] for i in lines(r.stdout)] == ids[::-1]
    assert r.stderr == ""
    doc = json.loads(run_cli("recent", "--all", "--format", "json").stdout)
    assert len(doc["items"]) == 45 and doc["next_cursor"] is None
    table = run_cli("recent", "--all")
    # In a pipe: no header, one tab-separated line per entry, whole ids (docs/cli.md, Output).
    assert [row.split("\t")[-1] for row in table.stdout.splitlines()] == ids[::-1]
    assert "Continue with" not in table.stderr


def test_recent_table_shows_age_time_author_domain_and_says_how_to_continue(cli, isolated_home: Path) -> None:
    seed(isolated_home, 4, domain="ci")
    r = cli("recent", "--limit", "2", "--scope", "ci", "--since", "2020-01-01", columns=120)
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["WHEN", "AUTHOR", "CONTENT"]  # one domain read: its column would repeat it
    assert len(rows) == 2
    assert "s ago" in rows[0] or "just now" in rows[0]
    assert "local/bot" in rows[0] and "ci" in rows[0] and "entry 3 in ci" in rows[0]
    assert "\x1b[" not in r.stdout  # NO_COLOR and a pipe: no colour
    assert "Continue with:" in r.stderr
    command = r.stderr.split("Continue with:\n")[1].splitlines()[0].split()
    assert command[:2] == ["mnemo", "recent"]
    assert "--since" in command and command[command.index("--since") + 1] == "2020-01-01T00:00:00.000000Z"
    nxt = cli(*command[1:])
    assert nxt.code == 0 and "entry 1 in ci" in nxt.stdout and "entry 0 in ci" in nxt.stdout


def test_the_continue_command_repeats_the_options_that_chose_the_store_and_works_pasted(
    cli, tmp_path: Path, isolated_home: Path
) -> None:
    seed(isolated_home, 3)  # the default store holds other entries: a hint without --store would read it
    other = tmp_path / "other's store.db"  # a path a shell must be given quoted
    store = Store(other)
    ids = [store.write("local", WriteRequest(f"other {i}", "ops")).atom_id for i in range(3)]
    store.close()
    r = cli("--store", str(other), "recent", "--limit", "1", columns=120)
    assert r.code == 0 and "other 2" in r.stdout, r.stderr
    command = shlex.split(r.stderr.split("Continue with:\n")[1].splitlines()[0])
    assert command[:3] == ["mnemo", "--store", str(other)] and command[3] == "recent"
    nxt = cli(*command[1:], "-f", "ndjson")
    assert nxt.code == 0, nxt.stderr
    assert [json.loads(line)["atom_id"] for line in nxt.stdout.splitlines()] == [ids[1]]


def test_the_continue_command_names_the_endpoint_and_never_a_password() -> None:
    from types import SimpleNamespace

    from mnemo_tui.cli.hints import continue_hint, root_words
    from mnemo_tui.values.model import RecentQuery

    given = SimpleNamespace(
        profile="work", store=None, endpoint="http://127.0.0.1:8799", database=None, utc=True, debug=True
    )
    hint = continue_hint(RecentQuery(limit=1), "CUR", root_words(given))
    assert "mnemo --profile work --endpoint http://127.0.0.1:8799 --utc recent --limit 1 --cursor CUR" in hint
    pytest.importorskip("psycopg")
    secret = SimpleNamespace(
        profile=None, store=None, endpoint=None, database="postgresql://u:s3cret@db.example:5433/mem", utc=False
    )
    words = root_words(secret)
    assert words == ["--database postgresql://u@db.example:5433/mem"]  # PGPASSWORD or ~/.pgpass give the rest
    plain = SimpleNamespace(profile=None, store=None, endpoint=None, database="host=/run/pg dbname=m", utc=False)
    assert root_words(plain) == ["--database 'host=/run/pg dbname=m'"]
    # The client certificate key's passphrase is a password too (libpq's sslpassword): never repeated.
    for url in ("postgresql://u@db.example/mem?sslpassword=s3cret", "host=db.example dbname=mem sslpassword=s3cret"):
        words = root_words(SimpleNamespace(profile=None, store=None, endpoint=None, database=url, utc=False))
        assert len(words) == 1 and "s3cret" not in words[0] and "db.example" in words[0], words


def test_recent_table_respects_the_width(cli, isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    store.write("local", WriteRequest("word " * 500))
    store.close()
    narrow = cli("recent", columns=60)
    assert all(len(line) <= 60 for line in narrow.stdout.splitlines())
    wide = cli("recent", columns=200)
    assert max(len(line) for line in wide.stdout.splitlines()) <= 200
    assert wide.stdout.splitlines()[0].split()[0] == "WHEN"


def test_an_empty_unscoped_read_names_the_unsearched_rooms(run_cli, isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    room = store.create_room("local", "ops-room")
    store.close()
    r = run_cli("recent")
    assert r.code == 0
    assert "holds no entries yet" in r.stdout
    assert room.address in r.stdout and f"Re-run with --scope {room.address}" in r.stdout
    nd = run_cli("recent", "--format", "ndjson")
    assert nd.stdout == "" and room.address in nd.stderr
    doc = json.loads(run_cli("recent", "--format", "json").stdout)
    assert doc["empty_report"]["kind"] == "empty_scope"
    assert doc["empty_report"]["unsearched_rooms"] == [{"name": "ops-room", "address": room.address}]


def test_filters_that_match_nothing_say_so(run_cli, isolated_home: Path) -> None:
    seed(isolated_home, 2)
    doc = json.loads(run_cli("recent", "-f", "json", "--exclude-author", "local").stdout)
    assert doc["items"] == [] and doc["empty_report"]["kind"] == "no_match"
    doc = json.loads(run_cli("recent", "-f", "json", "--until", "2000-01-01").stdout)
    assert doc["empty_report"]["kind"] == "no_match"


def test_a_cursor_from_other_filters_or_forged_is_exit_2(run_cli, isolated_home: Path) -> None:
    seed(isolated_home, 3)
    cursor = json.loads(run_cli("recent", "-n", "1", "-f", "json").stdout)["next_cursor"]
    foreign = run_cli("recent", "-n", "1", "--scope", "general", "--cursor", cursor)
    assert foreign.code == 2 and "cursor" in foreign.stderr and "Traceback" not in foreign.stderr
    flipped = cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1]
    forged = run_cli("recent", "-n", "1", "--cursor", flipped)
    assert forged.code == 2 and "cursor" in forged.stderr
    assert run_cli("recent", "--cursor", "not a cursor!").code == 2


def test_include_history_brings_back_superseded_entries(cli, isolated_home: Path) -> None:
    (old,) = seed(isolated_home, 1)
    new = cli("write", "newer text", "--supersedes", old)
    assert new.code == 0
    plain = lines(cli("recent", "-f", "ndjson").stdout)
    assert [i["atom_id"] for i in plain] == [new.stdout.strip()]
    history = lines(cli("recent", "-f", "ndjson", "--include-history").stdout)
    assert [i["atom_id"] for i in history] == [new.stdout.strip(), old]
    assert history[1]["superseded_by"] == new.stdout.strip()
    assert "(superseded)" in cli("recent", "--include-history", columns=100).stdout


def test_write_prints_the_atom_id_and_reads_stdin(run_cli) -> None:
    r = run_cli("write", "hello", "--scope", "notes", "--concept", "a", "-c", "b")
    assert r.code == 0 and len(r.stdout.strip()) == 36 and r.stdout.count("\n") == 1
    piped = run_cli("write", "-", input="from stdin\n")
    bare = run_cli("write", input="no dash\n")
    items = lines(run_cli("recent", "-f", "ndjson").stdout)
    by_id = {i["atom_id"]: i for i in items}
    assert by_id[r.stdout.strip()]["concepts"] == ["a", "b"] and by_id[r.stdout.strip()]["domain"] == "notes"
    assert by_id[piped.stdout.strip()]["content"] == "from stdin"
    assert by_id[bare.stdout.strip()]["content"] == "no dash"
    assert by_id[r.stdout.strip()]["provenance"]["client_env"] == "cli"  # type: ignore[index]


def test_write_with_a_repeated_ref_returns_the_first_atom(run_cli) -> None:
    first = run_cli("write", "once", "--ref", "job-42")
    again = run_cli("write", "twice", "--ref", "job-42")
    assert first.stdout == again.stdout and first.code == again.code == 0


def test_write_records_the_principal_and_agent_from_the_environment(run_cli) -> None:
    env = {"MNEMO_PRINCIPAL": "alice", "MNEMO_AGENT": "build-bot"}
    run_cli("write", "by alice", env=env)
    (item,) = lines(run_cli("recent", "-f", "ndjson", env=env).stdout)
    assert item["provenance"] == {
        "principal": "alice",
        "agent": "build-bot",
        "agent_name": "build-bot",
        "client_env": "cli",
        "is_external": False,
    }
    assert run_cli("recent", "-f", "ndjson").stdout == ""  # `local` has its own store


def test_search_shapes_and_refusals(run_cli, isolated_home: Path) -> None:
    seed(isolated_home, 3)
    doc = json.loads(run_cli("search", "entry", "-f", "json", "--order-by", "recency", "--limit", "2").stdout)
    assert set(doc) == {"items", "query", "scope"} and doc["query"] == "entry" and len(doc["items"]) == 2
    assert "relevance" in doc["items"][0]
    nd = lines(run_cli("search", "entry 1", "-f", "ndjson").stdout)
    assert nd and all("relevance" in i for i in nd)
    assert "entry 2 in general" in run_cli("search", "entry").stdout
    for args in (("search",), ("search", ""), ("search", "   ")):
        r = run_cli(*args)
        assert r.code == 2 and "mnemo recent" in r.stderr and "Traceback" not in r.stderr
    assert run_cli("search", "x", "--order-by", "newest").code == 2
    none = run_cli("search", "zebra")
    assert none.code == 0 and "matches the query 'zebra'" in none.stdout


def test_catchup_prints_only_what_is_new_then_commits(run_cli, isolated_home: Path) -> None:
    ids = seed(isolated_home, 5)
    first = run_cli("catchup", "--format", "json", "--limit", "2")
    doc = json.loads(first.stdout)
    assert set(doc) == {
        "scope",
        "consumer",
        "items",
        "watermark",
        "pages",
        "repeats_skipped",
        "resumed",
        "empty_report",
    }
    assert [i["atom_id"] for i in doc["items"]] == ids[::-1]
    assert doc["pages"] == 3 and doc["watermark"]["before"] is None and doc["resumed"] is False
    after = doc["watermark"]["after"]
    assert after["consumer"] == "default" and after["boundary_ids"] == [ids[-1]] and after["scope"] is None
    assert run_cli("catchup", "--exit-code").code == 1
    (new,) = seed(isolated_home, 1)
    second = run_cli("catchup", "-f", "ndjson", "--exit-code")
    assert second.code == 0 and [i["atom_id"] for i in lines(second.stdout)] == [new]
    empty = json.loads(run_cli("catchup", "-f", "json").stdout)
    assert empty["items"] == [] and empty["empty_report"]["kind"] == "nothing_new"
    assert empty["watermark"]["before"] == empty["watermark"]["after"]


def test_catchup_consumers_and_scopes_keep_separate_watermarks(run_cli, isolated_home: Path) -> None:
    seed(isolated_home, 2, domain="ci")
    seed(isolated_home, 2, domain="ops")
    assert len(lines(run_cli("catchup", "-f", "ndjson", "--scope", "ci").stdout)) == 2
    assert len(lines(run_cli("catchup", "-f", "ndjson").stdout)) == 4
    assert len(lines(run_cli("catchup", "-f", "ndjson", "--consumer", "other").stdout)) == 4
    assert len(lines(run_cli("catchup", "-f", "ndjson", env={"MNEMO_CONSUMER": "third"}).stdout)) == 4
    assert run_cli("catchup", "-f", "ndjson", "--scope", "ops").stdout.count("\n") == 2


def test_catchup_no_commit_leaves_the_watermark(run_cli, isolated_home: Path) -> None:
    seed(isolated_home, 3)
    assert len(lines(run_cli("catchup", "-f", "ndjson", "--no-commit").stdout)) == 3
    assert json.loads(run_cli("watermark", "show", "-f", "json").stdout) is None
    table = run_cli("catchup", "--no-commit")
    assert "watermark not moved" in table.stderr


def test_catchup_since_bounds_a_first_pass(run_cli, isolated_home: Path) -> None:
    seed(isolated_home, 2)
    future = timefmt.to_iso(timefmt.now_us() + 3_600_000_000)
    doc = json.loads(run_cli("catchup", "-f", "json", "--since", future).stdout)
    assert doc["items"] == [] and doc["empty_report"]["kind"] == "no_match"
    assert len(lines(run_cli("catchup", "-f", "ndjson", "--since", "1h").stdout)) == 2


def test_catchup_table_summarises_on_stderr(cli, isolated_home: Path) -> None:
    seed(isolated_home, 2)
    r = cli("catchup", columns=100)
    assert r.stdout.splitlines()[0].startswith("WHEN") and len(r.stdout.splitlines()) == 3
    assert "2 new entries for consumer 'default'" in r.stderr and "watermark now" in r.stderr
    assert "so far" not in r.stderr  # no progress in a pipe
    again = cli("catchup")
    assert "Nothing new" in again.stdout


def test_catchup_resume_with_nothing_to_resume_starts_a_new_pass(run_cli, isolated_home: Path) -> None:
    seed(isolated_home, 2)
    r = run_cli("catchup", "--resume", "-f", "ndjson")
    assert len(lines(r.stdout)) == 2 and "nothing to resume" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("recent", "--format", "yaml"),
        ("recent", "--limit", "0"),
        ("recent", "--limit", "101"),
        ("recent", "--limit", "many"),
        ("recent", "--since", "soon"),
        ("recent", "--since", "2026-11-30", "--until", "2026-11-01"),
        ("recent", "--scope", "xroom:"),
        ("recent", "--scope", "xroom:room_nope"),
        ("recent", "--scope", "x" * 101),
        ("recent", "--exclude-author", " "),
        ("recent", "--bogus"),
        ("recent", "extra-argument"),
        ("catchup", "--limit", "0"),
        ("catchup", "--overlap", "soon"),
        ("catchup", "--since", "never"),
        ("catchup", "--consumer", " "),
        ("catchup", "--format", "csv"),
        ("write", "x", "--supersedes", "not-a-uuid"),
        ("write", "x", "--scope", "xroom:bad"),
        ("write", "x" * 10_001),
        ("write", "x", "--supersedes", "3f0c3c2e-0000-4000-8000-000000000000"),
        ("search", "x", "--limit", "501"),
        ("search", "x", "--since", "later"),
    ],
)
def test_bad_input_is_one_message_and_exit_2(run_cli, args: tuple[str, ...]) -> None:
    r = run_cli(*args)
    assert r.code == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.strip() and r.stdout == ""


def test_a_room_one_is_not_in_is_exit_4(run_cli, isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    room = store.create_room("alice", "private")
    store.close()
    for args in (("recent", "--scope", room.address), ("write", "x", "--scope", room.address)):
        r = run_cli(*args)
        assert r.code == 4 and "not a member" in r.stderr and "Traceback" not in r.stderr


def run_with_ptys(
    home: Path, args: list[str], *, stdout_tty: bool, stderr_tty: bool, env: dict[str, str]
) -> tuple[str, str]:
    """Run mnemo with stdout and/or stderr on a pseudo-terminal; returns what each received."""
    from tests.support.cli import MNEMO, on_terminal, terminal_env

    streams = tuple(name for name, wanted in (("stdout", stdout_tty), ("stderr", stderr_tty)) if wanted)
    run = on_terminal([MNEMO, *args], env=terminal_env(home, MNEMO_PAGER="cat", **env), terminal=streams)
    assert run.code == 0
    return run.stdout, run.stderr


def test_progress_appears_on_a_terminal_stderr_only(isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    store.bulk_insert([("local", WriteRequest(f"entry {i}"), i + 1) for i in range(2500)])
    store.close()
    _out, err = run_with_ptys(
        isolated_home, ["recent", "--all", "--format", "ndjson"], stdout_tty=False, stderr_tty=True, env={}
    )
    assert "entries so far" in err
    _out, err = run_with_ptys(isolated_home, ["catchup", "-f", "ndjson"], stdout_tty=False, stderr_tty=True, env={})
    assert "new so far" in err
    _out, err = run_with_ptys(
        isolated_home, ["recent", "--all", "--format", "ndjson"], stdout_tty=False, stderr_tty=False, env={}
    )
    assert err == ""


def test_colour_on_a_terminal_unless_no_color(isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    store.write("local", WriteRequest("coloured entry"))
    store.close()
    out, _err = run_with_ptys(isolated_home, ["recent"], stdout_tty=True, stderr_tty=False, env={})
    assert "\x1b[" in out and "coloured entry" in out
    plain, _err = run_with_ptys(isolated_home, ["recent"], stdout_tty=True, stderr_tty=False, env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain and "coloured entry" in plain


@pytest.mark.parametrize(
    "args",
    [
        ["recent", "-f", "ndjson"],
        ["recent", "--all", "-f", "ndjson"],
        ["search", "evil", "-f", "ndjson"],
        ["catchup", "-f", "ndjson"],
        ["show", "{id}", "-f", "ndjson"],
    ],
)
def test_ndjson_on_a_terminal_escapes_what_a_terminal_acts_on_with_the_same_values(
    run_cli, isolated_home: Path, args: list[str]
) -> None:
    # As `json` on a terminal and `export` do: a C1 CSI, a bidi override or a line separator inside a JSON
    # string reaches no terminal raw; a pipe still gets the stored bytes.
    store = Store(isolated_home / "store.db")
    atom = store.write("local", WriteRequest("evil \u202e reversed \x9b31m and \u2028 split")).atom_id
    store.close()
    argv = [a.replace("{id}", atom) for a in args]
    piped = run_cli(*argv).stdout
    assert "\u202e" in piped
    assert run_cli("watermark", "reset").code == 0  # the catch-up on the terminal reads the same pass again
    shown, _err = run_with_ptys(isolated_home, argv, stdout_tty=True, stderr_tty=False, env={})
    assert "\u202e" not in shown and "\x9b" not in shown and "\u2028" not in shown and "\\u202e" in shown
    lines = shown.replace("\r\n", "\n").split("\n")  # str.splitlines would cut at a raw U+2028 too
    assert [json.loads(line) for line in lines if line] == [json.loads(line) for line in piped.split("\n") if line]
