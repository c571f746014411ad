"""`mnemo export` and `mnemo import` (issue 42, docs/export.md): lossless round trips through the embedded store,
PostgreSQL and a real `mnemo serve`, incremental exports, and clear refusals."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO, CliResult

Cli = Callable[..., CliResult]
SECRET = "s3cr3t-sealed-value-never-exported"


def fill(path: Path, entries: int = 230) -> list[str]:
    """A store with what an export must carry: domains, concepts, metadata, refs, a supersession chain, a room
    with two authors (one a read-only member), and a secret. Returns the room addresses."""
    store = Store(path)
    try:
        room = store.create_room("local", "team", "the team's room")
        code = store.create_invite("local", room.room_id, scope="read_write").code
        store.join("bob", code)
        read_only = store.create_invite("local", room.room_id, scope="read").code
        store.join("carol", read_only)
        address = room.address
        first = store.write("local", WriteRequest("v1 of a fact", "facts", ("fact",), {"n": 1}, "ref-1")).atom_id
        second = store.write("local", WriteRequest("v2 of a fact", "facts", supersedes=(first,))).atom_id
        store.write("local", WriteRequest("v3 of a fact ✓ \u2028 line", "facts", supersedes=(second,), agent="a1"))
        for i in range(entries):
            store.write("local", WriteRequest(f"entry {i}", f"d{i % 3}", (f"c{i % 5}",), {"i": i, "deep": {"x": [i]}}))
            if i % 10 == 0:
                store.write("bob", WriteRequest(f"room entry {i} by bob", address, ("room",), agent_name="bot"))
                store.write("local", WriteRequest(f"room entry {i} by local", address, external_ref=f"room-{i}"))
        other = store.create_room("bob", "bobs", None)
        store.write("bob", WriteRequest("bob's own room, not local's", other.address))
        store.write("bob", WriteRequest("bob's own store, never exported by local"))
        store.vault_add("local", "api-token", "the deploy token", SECRET)
        return [address]
    finally:
        store.close()


def feed(cli: Cli, where: list[str], scope: str | None = None) -> str:
    args = [*where, "recent", "--all", "--include-history", "--format", "ndjson"]
    result = cli(*args, *(["--scope", scope] if scope else []))
    assert result.code == 0, result.stderr
    return result.stdout


def export(cli: Cli, where: list[str], *args: str) -> CliResult:
    result = cli(*where, "export", *args)
    assert result.code == 0, result.stderr
    return result


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.split("\n") if line]  # not splitlines: U+2028 is in a content


def imported(cli: Cli, where: list[str], path: Path) -> dict[str, Any]:
    result = cli(*where, "import", str(path), "--format", "json")
    assert result.code == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_round_trip_into_an_empty_store_is_byte_identical(run_cli: Cli, tmp_path: Path) -> None:
    source = ["--store", str(tmp_path / "source.db")]
    rooms = fill(tmp_path / "source.db")
    done = export(run_cli, source)
    parsed = lines(done.stdout)
    head, end = parsed[0], parsed[-1]
    assert head["mnemo_export"] == 1 and head["scopes"] == [None, *rooms] and head["principal"] == "local"
    room = next(p["room"] for p in parsed if "room" in p)
    assert [m["principal"] for m in room["members"]] == ["local", "bob", "carol"]
    entries = [p for p in parsed if "atom_id" in p]
    assert end["end"]["entries"] == len(entries) == 230 + 3 + 2 * 23 and end["end"]["secrets_left_out"] == 1
    assert SECRET not in done.stdout and "api-token" not in done.stdout and "bob's own" not in done.stdout
    assert "1 secret(s)" in done.stderr
    assert any(e["metadata"] == {"n": 1} and e["external_ref"] == "ref-1" for e in entries)
    file = tmp_path / "export.ndjson"
    file.write_text(done.stdout)

    target = ["--store", str(tmp_path / "target.db")]
    first = imported(run_cli, target, file)
    assert first["created"] == len(entries) and first["times"]["kept"] == len(entries)
    assert first["rooms"] == {"created": 1, "present": 0}
    for scope in (None, *rooms):
        assert feed(run_cli, target, scope) == feed(run_cli, source, scope)
    # Bob's view of the room is the same too: members came with it.
    bob = {"MNEMO_PRINCIPAL": "bob"}
    assert run_cli(*target, "recent", "--all", "--scope", rooms[0], "-f", "ndjson", env=bob).stdout == feed(
        run_cli, source, rooms[0]
    )
    assert export(run_cli, target).stdout.split("\n")[1:-2] == done.stdout.split("\n")[1:-2]

    again = imported(run_cli, target, file)  # twice stores nothing new
    assert again["created"] == 0 and again["already_present"] == len(entries)
    assert feed(run_cli, target) == feed(run_cli, source)


def test_into_a_store_with_entries_times_are_assigned_and_the_import_says_so(run_cli: Cli, tmp_path: Path) -> None:
    source = ["--store", str(tmp_path / "source.db")]
    fill(tmp_path / "source.db", entries=20)
    file = tmp_path / "export.ndjson"
    file.write_text(export(run_cli, source).stdout)
    target = ["--store", str(tmp_path / "target.db")]
    assert run_cli(*target, "write", "already here").code == 0
    result = run_cli(*target, "import", str(file))
    assert result.code == 0 and "new times from the store's clock" in result.stderr
    old = lines(feed(run_cli, source))
    new = lines(feed(run_cli, target))
    assert {e["atom_id"] for e in old} < {e["atom_id"] for e in new}  # ids kept, the own entry besides
    by_id = {e["atom_id"]: e for e in new}
    assert all(by_id[e["atom_id"]]["created_at"] > e["created_at"] for e in old)  # after the store's last write
    # The order of the export is kept: newest first still, the older entry below its successor.
    assert [e["atom_id"] for e in new if e["atom_id"] in {o["atom_id"] for o in old}] == [e["atom_id"] for e in old]
    # The room, whose clock had never run here, keeps its times.
    room = run_cli(*target, "rooms", "list", "-f", "json")
    address = json.loads(room.stdout)[0]["address"]
    assert feed(run_cli, target, address) == feed(run_cli, source, address)
    assert imported(run_cli, target, file)["created"] == 0


def test_incremental_export_by_cursor_and_since(run_cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "source.db"
    source = ["--store", str(path)]
    rooms = fill(path, entries=15)
    full = export(run_cli, source).stdout
    cursor = lines(full)[-1]["end"]["cursor"]
    nothing = lines(export(run_cli, source, "--cursor", cursor).stdout)
    assert nothing[-1]["end"]["entries"] == 0 and nothing[-1]["end"]["cursor"] == cursor
    assert run_cli(*source, "write", "later, own").code == 0
    assert run_cli(*source, "write", "later, room", "--scope", rooms[0]).code == 0
    more = export(run_cli, source, "--cursor", cursor).stdout
    assert [e["content"] for e in lines(more) if "atom_id" in e] == ["later, own", "later, room"]
    (tmp_path / "full.ndjson").write_text(full)
    (tmp_path / "more.ndjson").write_text(more)
    target = ["--store", str(tmp_path / "target.db")]
    imported(run_cli, target, tmp_path / "full.ndjson")
    imported(run_cli, target, tmp_path / "more.ndjson")
    for scope in (None, *rooms):
        assert feed(run_cli, target, scope) == feed(run_cli, source, scope)

    since = lines(more)[2]["created_at"]  # the room line, then the own entry
    recent = lines(export(run_cli, source, "--since", since, "--scope", rooms[0]).stdout)
    assert [e["content"] for e in recent if "atom_id" in e] == ["later, room"]
    assert recent[0]["scopes"] == rooms


def test_refusals_are_clear_and_store_nothing(run_cli: Cli, tmp_path: Path) -> None:
    source = ["--store", str(tmp_path / "source.db")]
    fill(tmp_path / "source.db", entries=5)
    text = export(run_cli, source).stdout
    target = ["--store", str(tmp_path / "target.db")]
    assert run_cli(*target, "write", "x").code == 0
    cases = {
        "version.ndjson": text.replace('"mnemo_export":1', '"mnemo_export":2', 1),
        "other.ndjson": '{"hello": 1}\n',
        "cut.ndjson": "\n".join(text.split("\n")[:-2]) + "\n",
        "bad.ndjson": text.replace('"content":"entry 3"', '"content":""'),
    }
    said = {
        "version.ndjson": "format version 2; this mnemo reads version 1",
        "other.ndjson": "not a mnemo export",
        "cut.ndjson": "without its end line",
        "bad.ndjson": "content must be 1 to",
    }
    for name, body in cases.items():
        (tmp_path / name).write_text(body)
        result = run_cli(*target, "import", str(tmp_path / name))
        assert result.code == 2 and said[name] in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert len(lines(feed(run_cli, target))) == 1  # all or nothing: nothing of a refused file stays
    assert run_cli(*target, "import", str(tmp_path / "missing.ndjson")).code == 2
    assert run_cli(*source, "export", "--since", "1h", "--cursor", "x").code == 2
    refused = run_cli(*source, "export", "--cursor", "not-a-cursor")
    assert refused.code == 2 and "not an export cursor" in refused.stderr
    foreign = run_cli(*source, "export", "--scope", "xroom:room_01M8VPABN3DNQRKSK2ZK9TYVE9")
    assert foreign.code == 4 and foreign.stdout == "" and "not a member" in foreign.stderr
    # stdin works as a file.
    assert run_cli("--store", str(tmp_path / "t2.db"), "import", "-", input=text).code == 0


def test_store_to_postgresql_to_store_is_the_same(run_cli: Cli, tmp_path: Path, pg_databases: Any) -> None:
    source = ["--store", str(tmp_path / "source.db")]
    rooms = fill(tmp_path / "source.db", entries=120)
    (tmp_path / "a.ndjson").write_text(export(run_cli, source).stdout)
    name = pg_databases.create()
    try:
        pg = ["--database", pg_databases.cluster.url(name)]
        assert imported(run_cli, pg, tmp_path / "a.ndjson")["times"]["assigned"] == 0
        (tmp_path / "b.ndjson").write_text(export(run_cli, pg).stdout)
        back = ["--store", str(tmp_path / "back.db")]
        imported(run_cli, back, tmp_path / "b.ndjson")
        for scope in (None, *rooms):
            want = feed(run_cli, source, scope)
            assert feed(run_cli, pg, scope) == want
            assert feed(run_cli, back, scope) == want
        assert imported(run_cli, pg, tmp_path / "a.ndjson")["created"] == 0
    finally:
        pg_databases.drop(name)
    # `db copy` into PostgreSQL, then an export from there into a store: the same again.
    copied = pg_databases.empty()
    try:
        url = pg_databases.cluster.url(copied)
        assert run_cli("db", "copy", "--from", str(tmp_path / "source.db"), "--to", url).code == 0
        (tmp_path / "c.ndjson").write_text(export(run_cli, ["--database", url]).stdout)
        again = ["--store", str(tmp_path / "again.db")]
        imported(run_cli, again, tmp_path / "c.ndjson")
        for scope in (None, *rooms):
            assert feed(run_cli, again, scope) == feed(run_cli, source, scope)
    finally:
        pg_databases.drop(copied)


def test_over_a_real_serve_each_content_lands_once(run_cli: Cli, tmp_path: Path, isolated_home: Path) -> None:
    from tests.support.serve import start_serve

    source = ["--store", str(tmp_path / "source.db")]
    rooms = fill(tmp_path / "source.db", entries=150)
    file = tmp_path / "export.ndjson"
    text = export(run_cli, source).stdout
    file.write_text(text)
    key = run_cli("keys", "create", "alice").stdout.strip()  # the served store: $MNEMO_HOME/store.db
    served = start_serve(isolated_home)
    try:
        env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key}
        first = run_cli("import", str(file), "--format", "json", env=env)
        assert first.code == 0, first.stderr
        summary = json.loads(first.stdout)
        own = [e for e in lines(text) if "atom_id" in e and not e["domain"].startswith("xroom:")]
        assert summary["created"] == len(own) and summary["skipped_rooms"][0]["address"] == rooms[0]
        assert "you may not write to that room" in first.stderr and "new times" in first.stderr
        second = run_cli("import", str(file), "--format", "json", env=env)
        assert json.loads(second.stdout)["created"] == 0
        walked = lines(run_cli("recent", "--all", "--include-history", "-f", "ndjson", env=env).stdout)
        assert sorted(e["content"] for e in walked) == sorted(e["content"] for e in own)
        # Supersession came along: the chain's newest is the only live revision of the fact.
        live = lines(run_cli("recent", "--all", "--scope", "facts", "-f", "ndjson", env=env).stdout)
        assert [e["content"] for e in live] == ["v3 of a fact ✓ \u2028 line"]
        # Exported over the endpoint (the feed walked newest first, read back oldest first), the entries are the
        # ones the served store holds, with their metadata and refs.
        over = run_cli("export", env=env)
        assert over.code == 0, over.stderr
        engine_lines = run_cli("export", env={"MNEMO_PRINCIPAL": "alice"}).stdout.split("\n")
        assert over.stdout.split("\n")[1:-2] == engine_lines[1:-2]
        assert any(e.get("external_ref") == "import:" + own[-1]["atom_id"] for e in lines(over.stdout))
        # Review #4: an export of the endpoint imported back onto it stores nothing twice, even an entry that
        # was written there without an external_ref (its id is visible there: already there).
        assert run_cli("write", "written at the endpoint, no ref", env=env).code == 0
        back = tmp_path / "back.ndjson"
        back.write_text(run_cli("export", env=env).stdout)
        again = run_cli("import", str(back), "--format", "json", env=env)
        assert again.code == 0 and json.loads(again.stdout)["created"] == 0, again.stdout + again.stderr
    finally:
        served.stop()


@pytest.mark.parametrize("command", ["export", "import"])
def test_commands_are_listed_and_documented(run_cli: Cli, command: str) -> None:
    assert command in run_cli("--help").stdout
    assert run_cli(command, "--help").code == 0
    assert f"mnemo {command}" in (Path(__file__).parents[2] / "docs" / "cli.md").read_text()


def test_a_room_line_from_an_endpoint_export_becomes_a_room_of_its_importer(run_cli: Cli, tmp_path: Path) -> None:
    room_id = "room_01M8VPABN3DNQRKSK2ZK9TYVE9"
    header = {"mnemo_export": 1, "scopes": [f"xroom:{room_id}"]}
    room = {"room_id": room_id, "name": "ops", "description": None, "owner": None, "created_at": None}
    entry = {
        "atom_id": "0b7a4c1e-7f6a-4c59-9a51-3d1f4f1c2a10",
        "content": "from the endpoint",
        "domain": f"xroom:{room_id}",
        "created_at": "2026-11-30T07:00:00.123456Z",
        "concepts": [],
        "provenance": {"principal": "alice", "agent": None, "agent_name": None, "client_env": "cli"},
        "metadata": {},
        "external_ref": None,
    }
    body = [header, {"room": {**room, "archived": False, "members": None}}, entry, {"end": {"entries": 1}}]
    file = tmp_path / "remote.ndjson"
    file.write_text("".join(json.dumps(line) + "\n" for line in body))
    target = ["--store", str(tmp_path / "target.db")]
    assert imported(run_cli, target, file)["rooms"]["created"] == 1
    rooms = json.loads(run_cli(*target, "rooms", "list", "-f", "json").stdout)
    assert [(r["name"], r["role"]) for r in rooms] == [("ops", "owner")]
    (got,) = lines(feed(run_cli, target, f"xroom:{room_id}"))
    assert got["created_at"] == entry["created_at"] and got["provenance"]["principal"] == "alice"


def on_terminal(args: list[str], home: Path, stream: str) -> str:
    """What `mnemo ARGS` writes to `stream` (stdout, stderr, or both) when that is a terminal (a pty)."""
    from tests.support import cli

    streams = ("stdout", "stderr") if stream == "both" else (stream,)
    run = cli.on_terminal([cli.MNEMO, *args], env=cli.terminal_env(home, NO_COLOR="1"), terminal=streams)
    assert run.code == 0
    return run.stderr if stream == "stderr" else run.stdout


def test_progress_is_a_bar_on_a_terminal_and_nothing_in_a_pipe(run_cli: Cli, tmp_path: Path) -> None:
    fill(tmp_path / "source.db", entries=1200)
    piped = run_cli("--store", str(tmp_path / "source.db"), "export")
    assert "\r" not in piped.stderr and "%" not in piped.stderr
    text = on_terminal(["--store", str(tmp_path / "source.db"), "export"], tmp_path, "stderr")
    assert "/1,443 entries exported" in text and "] " in text and "\x1b[K" in text  # 1,200 + 3 + 2 x 120
    # Review #10: the data on the same terminal draws no bar over it.
    both = on_terminal(["--store", str(tmp_path / "source.db"), "export"], tmp_path, "both")
    assert "entries exported" not in both and "\r[" not in both and "exported 1,443 entries" in both


def test_on_a_terminal_what_a_terminal_acts_on_is_escaped_with_the_same_values(run_cli: Cli, tmp_path: Path) -> None:
    store = Store(tmp_path / "source.db")
    store.write("local", WriteRequest("evil \u202e reversed \x9b31m and \u2028 split"))
    store.close()
    piped = run_cli("--store", str(tmp_path / "source.db"), "export").stdout
    shown = on_terminal(["--store", str(tmp_path / "source.db"), "export"], tmp_path, "stdout")
    assert "\u202e" not in shown and "\x9b" not in shown and "\\u202e" in shown and "\\u009b" in shown
    entry = [json.loads(line) for line in shown.replace("\r\n", "\n").split("\n") if '"atom_id"' in line]
    assert entry == [e for e in lines(piped) if "atom_id" in e]


def test_a_repeated_line_is_stored_once_and_a_foreign_room_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    source = ["--store", str(tmp_path / "source.db")]
    rooms = fill(tmp_path / "source.db", entries=3)
    text = export(run_cli, source).stdout.split("\n")
    entry_lines = [line for line in text if '"atom_id"' in line]
    doubled = tmp_path / "doubled.ndjson"
    doubled.write_text("\n".join([text[0], entry_lines[0], entry_lines[0], text[-2]]) + "\n")
    target = ["--store", str(tmp_path / "target.db")]
    done = imported(run_cli, target, doubled)
    assert done["created"] == 1 and done["already_present"] == 1
    assert done["differing"] == 0
    # Review #16: the same id with another content is not dropped silently.
    other = entry_lines[0].replace('"content":"', '"content":"changed ', 1)
    (tmp_path / "differs.ndjson").write_text("\n".join([text[0], entry_lines[0], other, text[-2]]) + "\n")
    said = run_cli("--store", str(tmp_path / "t3.db"), "import", str(tmp_path / "differs.ndjson"))
    assert said.code == 0 and "1 entry named an id already stored here with another content" in said.stderr
    room_entries = [line for line in entry_lines if rooms[0] in line]
    foreign = tmp_path / "foreign.ndjson"  # a room's entries without the room line: no such room here
    foreign.write_text("\n".join([text[0], *room_entries, text[-2]]) + "\n")
    refused = run_cli(*target, "import", str(foreign))
    assert refused.code == 4 and f"cannot import into {rooms[0]}" in refused.stderr
    assert len(lines(feed(run_cli, target))) == 1


def exporting(tmp_path: Path) -> subprocess.Popen[bytes]:
    """`mnemo export` of a store far larger than a pipe holds (in several chunks), once it has written its first
    100 bytes, the header: it is writing, blocked on the full pipe mid-way."""
    fill(tmp_path / "source.db", entries=6000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    proc = subprocess.Popen(
        [MNEMO, "--store", str(tmp_path / "source.db"), "export"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "MNEMO_HOME": str(tmp_path)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100).startswith(b'{"mnemo_export":1')
    return proc


def test_a_reader_that_goes_away_stops_the_export_quietly(tmp_path: Path) -> None:
    proc = exporting(tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -c 100`
    errors = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in errors and "Exception" not in errors, errors


def test_a_future_time_is_never_kept_and_the_import_says_so(run_cli: Cli, tmp_path: Path) -> None:
    """Review #1: one entry dated 2099 must not hold the store's clock (every later write) in 2099."""
    source = ["--store", str(tmp_path / "source.db")]
    assert run_cli(*source, "write", "dated right").code == 0
    assert run_cli(*source, "write", "dated far ahead").code == 0
    text = export(run_cli, source).stdout.split("\n")
    ahead = json.loads(text[2])
    ahead["created_at"] = "2099-01-01T00:00:00.000000Z"
    text[2] = json.dumps(ahead)
    file = tmp_path / "future.ndjson"
    file.write_text("\n".join(text))
    target = ["--store", str(tmp_path / "target.db")]
    result = run_cli(*target, "import", str(file), "--format", "json")
    assert result.code == 0, result.stderr
    times = json.loads(result.stdout)["times"]
    assert times == {"kept": 1, "assigned": 1, "future": 1}
    assert "1 of them were dated in the future" in result.stderr
    assert run_cli(*target, "write", "written after the import").code == 0
    stored = lines(feed(run_cli, target))
    assert [e["content"] for e in stored] == ["written after the import", "dated far ahead", "dated right"]
    assert all(not e["created_at"].startswith("2099") for e in stored)


def test_a_full_export_and_its_increment_concatenated_import_whole(run_cli: Cli, tmp_path: Path) -> None:
    """Review #2: `cat full inc | mnemo import -` reads both exports; anything else after an end line is refused."""
    path = tmp_path / "source.db"
    source = ["--store", str(path)]
    fill(path, entries=5)
    full = export(run_cli, source).stdout
    assert run_cli(*source, "write", "later, own").code == 0
    more = export(run_cli, source, "--cursor", lines(full)[-1]["end"]["cursor"]).stdout
    target = ["--store", str(tmp_path / "target.db")]
    both = run_cli(*target, "import", "-", "--format", "json", input=full + more)
    assert both.code == 0, both.stderr
    assert json.loads(both.stdout)["created"] == len([e for e in lines(full + more) if "atom_id" in e])
    assert feed(run_cli, target) == feed(run_cli, source)
    garbage = run_cli("--store", str(tmp_path / "t2.db"), "import", "-", input=full + "garbage\n")
    number = len(full.split("\n"))
    assert garbage.code == 2 and f"stdin line {number}: content after the end line" in garbage.stderr, garbage.stderr
    assert run_cli("--store", str(tmp_path / "t2.db"), "export").stdout.count('"atom_id"') == 0


def test_an_id_of_another_bucket_is_never_already_there(run_cli: Cli, tmp_path: Path) -> None:
    """Review #3: importing as another principal never counts someone else's entries as its own."""
    path = tmp_path / "source.db"
    source = ["--store", str(path)]
    rooms = fill(path, entries=3)
    text = export(run_cli, source).stdout
    file = tmp_path / "e.ndjson"
    file.write_text(text)
    mallory = {"MNEMO_PRINCIPAL": "mallory"}
    own = run_cli(*source, "import", str(file), env=mallory)
    assert own.code == 2 and "line " in own.stderr and "another store or room" in own.stderr, own.stderr
    assert "already there" not in own.stdout
    split = text.split("\n")
    room_only = [split[0], *[x for x in split if x.startswith('{"room"') or (rooms[0] in x and '"atom_id"' in x)]]
    (tmp_path / "room.ndjson").write_text("\n".join([*room_only, split[-2]]) + "\n")
    room = run_cli(*source, "import", str(tmp_path / "room.ndjson"), env=mallory)
    assert room.code == 4 and "not a member" in room.stderr, room.stderr
    assert run_cli(*source, "export", env=mallory).stdout.count('"atom_id"') == 0


def test_bad_lines_are_named_and_long_ones_refused_unread(run_cli: Cli, tmp_path: Path) -> None:
    """Review #8, #9, #14, #15: every refusal names its line; a line past the bound is not read whole."""
    source = ["--store", str(tmp_path / "source.db")]
    for i in range(3):
        assert run_cli(*source, "write", f"entry {i}").code == 0
    text = export(run_cli, source).stdout
    target = ["--store", str(tmp_path / "target.db")]
    cases = {
        "nul": (text.replace('"content":"entry 1"', '"content":"a\\u0000b"'), "stdin line 3: content holds a NUL"),
        "long": (text.replace('"content":"entry 1"', '"content":"' + "x" * 10_001 + '"'), "stdin line 3: content"),
        "surrogate": (text.replace('"content":"entry 1"', '"content":"\\ud800"'), "stdin line 3 holds a lone"),
        "huge": (text.replace('"content":"entry 1"', '"content":"' + "y" * 2_000_000 + '"'), "line 3 is longer than"),
        "true": (text.replace('"mnemo_export":1', '"mnemo_export":true'), "format version True"),
        "float": (text.replace('"mnemo_export":1', '"mnemo_export":1.0'), "format version 1.0"),
        "cut": (text[: text.index('"content":"entry 1"')], "ends in the middle of line 3"),
    }
    for name, (body, said) in cases.items():
        result = run_cli(*target, "import", "-", input=body)
        assert result.code == 2 and said in result.stderr, (name, result.stderr)
        assert "not valid UTF-8" not in result.stderr and "Traceback" not in result.stderr
    assert run_cli(*target, "export").stdout.count('"atom_id"') == 0


def to_full_disk(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Run mnemo with stdout on /dev/full (every write: no space left on device)."""
    import os
    import subprocess

    from tests.support.cli import MNEMO

    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [MNEMO, *args], stdout=full, stderr=subprocess.PIPE, text=True, env={**env, "MNEMO_HOME": str(tmp_path)}
        )
    return proc.returncode, proc.stderr


def test_a_full_disk_is_said_plainly_and_an_import_says_it_was_stored(run_cli: Cli, tmp_path: Path) -> None:
    """Review #7: `> /dev/full` is local trouble (6), never "internal error" with 5 (backend unreachable)."""
    source = ["--store", str(tmp_path / "source.db")]
    fill(tmp_path / "source.db", entries=3)
    code, errors = to_full_disk(tmp_path, *source, "export")
    assert code == 6 and errors.strip() == "mnemo: cannot write the output: No space left on device", errors
    file = tmp_path / "e.ndjson"
    file.write_text(export(run_cli, source).stdout)
    target = ["--store", str(tmp_path / "target.db")]
    code, errors = to_full_disk(tmp_path, *target, "import", str(file))
    assert code == 6 and "the import is stored (imported 8 entries: 8 stored" in errors, errors
    assert "internal error" not in errors and "Exception" not in errors
    done = imported(run_cli, target, file)  # it was stored: a second import finds every entry
    assert done["created"] == 0 and done["already_present"] == 8
    assert "imported 8 entries: 0 stored, 8 already there" in run_cli(*target, "import", str(file)).stdout


def test_a_typo_in_the_scope_is_said_with_the_nearest_name_and_one_entry_is_singular(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Review #11 and #23: an export of no such domain says so (as reads do); "1 entry", not "1 entries"."""
    source = ["--store", str(tmp_path / "source.db")]
    assert run_cli(*source, "write", "the only one", "--scope", "ops").code == 0
    typo = export(run_cli, source, "--scope", "opz")
    assert "your own store has no domain 'opz'" in typo.stderr and "Did you mean domain 'ops'?" in typo.stderr
    one = export(run_cli, source, "--scope", "ops")
    assert "exported 1 entry and" in one.stderr and "no domain" not in one.stderr
    file = tmp_path / "one.ndjson"
    file.write_text(one.stdout)
    assert run_cli("--store", str(tmp_path / "t.db"), "import", str(file)).stdout.startswith(
        "imported 1 entry: 1 stored"
    )


def test_room_refusals_say_what_is_true(run_cli: Cli, tmp_path: Path) -> None:
    """Review #12, #13: no `rooms rename` is suggested; a room the import created names the importer missing."""
    source = ["--store", str(tmp_path / "source.db")]
    fill(tmp_path / "source.db", entries=3)
    file = tmp_path / "e.ndjson"
    file.write_text(export(run_cli, source).stdout)
    clash = ["--store", str(tmp_path / "clash.db")]
    assert run_cli(*clash, "rooms", "create", "team").code == 0
    refused = run_cli(*clash, "import", str(file))
    assert refused.code == 2 and "already has another room named 'team'" in refused.stderr
    assert "rename" not in refused.stderr and "nothing was imported" in refused.stderr
    own_only = file.read_text().split("\n")
    room_file = tmp_path / "rooms.ndjson"  # the room lines and the room's entries only
    kept = [x for x in own_only if "xroom:" in x or x.startswith(('{"room"', '{"mnemo_export"', '{"end"'))]
    room_file.write_text("\n".join(kept) + "\n")
    other = run_cli("--store", str(tmp_path / "other.db"), "import", str(room_file), env={"MNEMO_PRINCIPAL": "mallory"})
    assert other.code == 4 and "a room this import creates: the importer (mallory) is not among" in other.stderr


def test_import_dash_on_a_terminal_is_refused_instead_of_waiting(tmp_path: Path) -> None:
    """Review #18: as `verify --expect -`, a terminal on stdin is refused, not waited on."""
    from tests.support.cli import MNEMO, on_terminal, terminal_env

    args = [MNEMO, "--store", str(tmp_path / "t.db"), "import", "-"]
    proc = on_terminal(args, env=terminal_env(tmp_path, NO_COLOR="1"), terminal=("stdin",))
    assert proc.code == 2 and "stdin is a terminal" in proc.stderr


def test_an_interrupted_export_says_it_is_incomplete(tmp_path: Path) -> None:
    """Review #17: Ctrl-C mid-export says the file is incomplete (not only "nothing half-committed")."""
    import signal

    proc = exporting(tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    errors = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 130, errors
    assert "the export on stdout is incomplete" in errors and b'{"end"' not in rest


SUMMARY = re.compile(r"^imported ([\d,]+) entr(?:y|ies): ([\d,]+) stored, ([\d,]+) already there, ([\d,]+) skipped;")


def summed(stdout: str) -> tuple[int, int, int, int]:
    """The table summary's (entries, stored, already there, skipped)."""
    found = SUMMARY.match(stdout)
    assert found is not None, stdout
    entries, stored, present, skipped = (int(n.replace(",", "")) for n in found.groups())
    return entries, stored, present, skipped


def test_an_import_onto_a_real_serve_counts_every_entry_it_skipped(
    run_cli: Cli, tmp_path: Path, isolated_home: Path
) -> None:
    from tests.support.serve import start_serve

    rooms = fill(tmp_path / "source.db", entries=40)
    file = tmp_path / "export.ndjson"
    file.write_text(export(run_cli, ["--store", str(tmp_path / "source.db")]).stdout)
    in_file = [e for e in lines(file.read_text()) if "atom_id" in e]
    in_rooms = sum(1 for e in in_file if e["domain"].startswith("xroom:"))
    assert in_rooms > 0
    key = run_cli("keys", "create", "alice").stdout.strip()
    served = start_serve(isolated_home)
    try:
        env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key}
        first = run_cli("import", str(file), env=env)
        assert first.code == 0, first.stderr
        assert summed(first.stdout) == (len(in_file), len(in_file) - in_rooms, 0, in_rooms)
        assert first.stdout.count("\n") == 1 and rooms[0] in first.stderr  # the notes stay on stderr
        again = run_cli("import", str(file), env=env)
        assert summed(again.stdout) == (len(in_file), 0, len(in_file) - in_rooms, in_rooms)
        as_json = json.loads(run_cli("import", str(file), "--format", "json", env=env).stdout)
        assert as_json["skipped"] == in_rooms and as_json["entries"] == len(in_file)
    finally:
        served.stop()


def test_a_refused_import_leaves_no_store_it_created(run_cli: Cli, tmp_path: Path) -> None:
    fill(tmp_path / "source.db", entries=20)
    text = export(run_cli, ["--store", str(tmp_path / "source.db")]).stdout
    cut = tmp_path / "cut.ndjson"
    cut.write_text("\n".join(text.split("\n")[:-2]) + "\n")  # the end line left out
    new = tmp_path / "new.db"
    refused = run_cli("--store", str(new), "import", str(cut))
    assert refused.code == 2 and "cut short" in refused.stderr, refused.stderr
    assert run_cli("--store", str(new), "import", str(tmp_path / "export.ndjson")).code == 2  # no such file
    # Refused by the store itself (exit 4): a room whose members leave out the importer.
    full = tmp_path / "full.ndjson"
    full.write_text(text)
    forbidden = run_cli("--store", str(new), "import", str(full), env={"MNEMO_PRINCIPAL": "mallory"})
    assert forbidden.code == 4, forbidden.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.ndjson", "full.ndjson", "home", "source.db"]
    # A store that was there before is left as it was, refused or not.
    kept = tmp_path / "kept.db"
    assert run_cli("--store", str(kept), "write", "already here").code == 0
    assert run_cli("--store", str(kept), "import", str(cut)).code == 2
    assert [e["content"] for e in lines(feed(run_cli, ["--store", str(kept)]))] == ["already here"]
