"""Tombstones and `catchup --changes` (issue 39): every delete path leaves one at its bucket's clock, a
consumer hears of each removal once, a retention past its watermark is a re-read (exit 8), and an
endpoint that keeps none is said to (exit 2); on both engines, in this process and through `mnemo serve`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.backends import Backend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.tombstones import TombstoneOps
from mnemo_tui.errors import Forbidden, RemovalsGone, ValidationError
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import Entry
from mnemo_tui.values.removals import Removal
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import CliResult
from tests.support.targets import Target
from tests.support.wire import Canned, serving


def _write(engine: Any, who: str, domain: str, n: int = 1) -> list[str]:
    return [engine.write(who, WriteRequest(content=f"{domain} {i}", domain=domain)).atom_id for i in range(n)]


def _times(engine: Any, who: str, ids: list[str]) -> list[int]:
    return [engine.get(who, i).created_at for i in ids]


def test_every_delete_path_leaves_its_tombstones_at_the_buckets_clock(target: Target) -> None:
    engine = target.open()
    try:
        one = _write(engine, "alice", "notes", 2)
        wiped = _write(engine, "alice", "scratch", 3)
        assert engine.delete("alice", one[0]) == 1
        after_delete = _write(engine, "alice", "notes")
        assert engine.delete_domain("alice", "scratch").deleted == 3
        rest = engine.removals("alice", None, None).items
        assert [(r.atom_id, r.reason, r.scope) for r in rest] == [
            (one[0], "deleted", "notes"),
            *sorted(((i, "domain_wiped", "scratch") for i in wiped), key=lambda t: t[0]),
        ]
        # The bucket's clock: a removal sits strictly between the entries written before and after it, and a
        # set's tombstones share one instant.
        before, later = _times(engine, "alice", [one[1], after_delete[0]])
        assert before < rest[0].removed_at < later < rest[1].removed_at == rest[3].removed_at
        assert [r.atom_id for r in engine.removals("alice", "scratch", None).items] == sorted(wiped)
        assert engine.removals("alice", "notes", rest[0].removed_at).items == []

        assert engine.reset("alice") == 2
        reset = engine.removals("alice", None, rest[-1].removed_at).items
        assert {(r.atom_id, r.reason) for r in reset} == {(one[1], "reset"), (after_delete[0], "reset")}

        room = engine.create_room("alice", "team")
        scope = "xroom:" + room.room_id
        invite = engine.create_invite("alice", room.room_id)
        engine.join("bob", invite.code)
        in_room = _write(engine, "bob", scope, 2)
        assert engine.delete_room("alice", room.room_id) == 2
        # A former member still hears of the room's removals (its copies hold the entries); a stranger does not.
        gone = engine.removals("bob", scope, None).items
        assert sorted(r.atom_id for r in gone) == sorted(in_room)
        assert {(r.reason, r.scope) for r in gone} == {("room_deleted", scope)}
        with pytest.raises(Forbidden):
            engine.removals("carol", scope, None)
        assert engine.removals("carol", None, None).items == []
    finally:
        engine.close()


def test_a_room_entry_deleted_by_its_author_leaves_a_tombstone_only_when_the_delete_happens(target: Target) -> None:
    engine = target.open()
    try:
        room = engine.create_room("alice", "team")
        scope = "xroom:" + room.room_id
        engine.join("bob", engine.create_invite("alice", room.room_id, scope="read").code)
        mine = _write(engine, "alice", scope)[0]
        with pytest.raises(Forbidden):
            engine.delete("bob", mine)  # a read-only member: refused, and nothing is buried
        assert engine.removals("alice", scope, None).items == []
        assert engine.delete("alice", mine) == 1
        assert [(r.atom_id, r.reason) for r in engine.removals("bob", scope, None).items] == [(mine, "deleted")]
    finally:
        engine.close()


def test_tombstones_past_the_retention_are_dropped_and_an_older_watermark_is_told_to_re_read(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = target.open()
    try:
        ids = _write(engine, "alice", "notes", 3)
        watermark = _times(engine, "alice", ids)[-1]
        engine.delete("alice", ids[0])
        assert not engine.removals("alice", None, watermark).gone
        monkeypatch.setattr(TombstoneOps, "tombstone_retention", 0)
        assert engine.removals("alice", None, watermark).gone  # past the retention: not reported, re-read
        engine.delete("alice", ids[1])  # a delete drops what is past the retention (here: all), remembering how far
        monkeypatch.setattr(TombstoneOps, "tombstone_retention", None)
        assert engine.removals("alice", None, None).items == []
        engine.delete("alice", ids[2])
        found = engine.removals("alice", None, watermark)
        assert found.gone  # the first two are gone for good, whatever the retention now says
        [kept] = engine.removals("alice", None, None).items
        assert kept.atom_id == ids[2]
        # A watermark at or past the newest dropped removal has missed nothing: it reads what is kept.
        newer = engine.removals("alice", None, kept.removed_at - 1)
        assert not newer.gone and newer.items == [kept]
    finally:
        engine.close()


class Sink:
    def __init__(self) -> None:
        self.entries: list[str] = []
        self.removed: list[Removal] = []

    def __call__(self, entries: list[Entry]) -> None:
        self.entries.extend(e.atom_id for e in entries)

    def gone(self, items: list[Removal]) -> None:
        self.removed.extend(items)


def _pass(backend: Backend, state: StateDB, scope: str | None = None) -> Sink:
    sink = Sink()
    CatchUp(backend, state, scope=scope, changes=True).run(sink, removed=sink.gone)
    return sink


def test_a_consumer_hears_of_each_removal_once_on_every_backend(
    make_backend: Callable[[str], Backend], state: StateDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = make_backend("alice")
    first = [backend.write(WriteRequest(content=f"e{i}", domain="notes")).atom_id for i in range(3)]
    assert (seen := _pass(backend, state)).entries == first[::-1] and seen.removed == []
    backend.delete(first[0])
    again = _pass(backend, state)
    assert again.entries == [] and [r.atom_id for r in again.removed] == [first[0]]
    # Only removals moved the watermark: the next pass repeats neither them nor an entry.
    assert (quiet := _pass(backend, state)).entries == [] and quiet.removed == []
    later = backend.write(WriteRequest(content="later", domain="notes")).atom_id
    backend.delete(first[1])
    both = _pass(backend, state)
    assert both.entries == [later] and [(r.atom_id, r.reason, r.scope) for r in both.removed] == [
        (first[1], "deleted", "notes")
    ]
    # Without --changes nothing is read of removals, and a pass reports none.
    backend.delete(first[2])
    plain = Sink()
    CatchUp(backend, state, consumer="other").run(plain, removed=plain.gone)
    assert plain.removed == [] and len(plain.entries) == 1
    # The retention runs out between two passes (a retention the test sets): the re-read answer, nothing moved.
    monkeypatch.setattr(TombstoneOps, "tombstone_retention", 0)
    walk = CatchUp(backend, state, changes=True)
    before = walk.watermark()
    with pytest.raises(RemovalsGone, match="re-read this scope") as refused:
        walk.run(Sink())
    assert refused.value.exit_code == 8
    assert walk.watermark() == before


def test_an_endpoint_that_keeps_no_tombstones_is_said_to(state: StateDB) -> None:
    # The hosted service has no removals extension: its 404, as it answers an unknown path.
    app = Canned().answer(404, {"code": "NOT_FOUND", "message": "Not Found", "requestId": None, "retryable": False})
    with serving(app) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "5" * 32)
        try:
            with pytest.raises(ValidationError, match="keeps no removals") as refused:
                CatchUp(backend, state, changes=True).run(Sink())
            assert refused.value.exit_code == 2
            assert [(m, p) for m, p, _ in app.seen] == [("POST", "/api/v1/memory/removals")]
        finally:
            backend.close()


def _json(result: CliResult) -> dict[str, Any]:
    assert result.code == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_catchup_changes_in_json_ndjson_and_the_table(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    store = ["--store", str(tmp_path / "s.db")]
    first = cli(*store, "write", "first words").stdout.strip()
    second = cli(*store, "write", "second words").stdout.strip()
    for consumer in ("j", "n", "t", "plain"):
        assert cli(*store, "catchup", "-c", consumer, "-f", "json").code == 0
    assert cli(*store, "delete", "--yes", first).code == 0

    document = _json(cli(*store, "catchup", "--changes", "-c", "j", "-f", "json"))
    assert document["items"] == [] and document["empty_report"] is not None
    [removed] = document["removed"]
    assert removed["atom_id"] == first and removed["reason"] == "deleted" and removed["scope"] == "general"
    assert removed["removed_at"] == document["watermark"]["after"]["created_at"]
    assert _json(cli(*store, "catchup", "--changes", "-c", "j", "-f", "json"))["removed"] == []

    lines = cli(*store, "catchup", "--changes", "-c", "n", "-f", "ndjson")
    assert lines.code == 0 and [json.loads(line) for line in lines.stdout.splitlines()] == [{"removed": removed}]
    # A removal is something new: stderr does not say "Nothing new" under it, as the table does not.
    assert "Nothing new" not in lines.stderr, lines.stderr

    table = cli(*store, "catchup", "--changes", "-c", "t")
    assert table.code == 0 and "removed (deleted)" in table.stdout and first[:8] in table.stdout
    assert "1 removal reported" in table.stderr

    plain = _json(cli(*store, "catchup", "-c", "plain", "-f", "json"))
    assert "removed" not in plain and plain["items"] == []

    cli(*store, "delete", "--yes", second)
    expired = cli(*store, "catchup", "--changes", "-c", "j", env={"MNEMO_TOMBSTONE_RETENTION": "0s"})
    assert expired.code == 8 and expired.stdout == ""
    assert "re-read this scope" in expired.stderr and "watermark reset" in expired.stderr
    bad = cli(*store, "catchup", "--changes", env={"MNEMO_TOMBSTONE_RETENTION": "soon"})
    assert bad.code == 2 and "MNEMO_TOMBSTONE_RETENTION" in bad.stderr


def test_catchup_changes_in_a_pipe_gives_removals_the_entries_tab_separated_columns(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = ["--store", str(tmp_path / "s.db")]
    gone = cli(*store, "write", "--scope", "ops", "soon gone").stdout.strip()
    for consumer in ("pipe", "term"):
        assert cli(*store, "catchup", "-c", consumer, "-f", "json").code == 0
    assert cli(*store, "delete", "--yes", gone).code == 0
    stays = cli(*store, "write", "--scope", "ops", "stays").stdout.strip()
    removal = _json(cli(*store, "catchup", "--changes", "--no-commit", "-c", "pipe", "-f", "json"))["removed"][0]

    piped = cli(*store, "catchup", "--changes", "-c", "pipe", "--utc")
    assert piped.code == 0 and "1 removal reported" in piped.stderr
    rows = [line.split("\t") for line in piped.stdout.splitlines()]
    # No header, no padding: five values a line, the whole id last (`cut -f5`), the removal empty where the author goes.
    assert [row[4] for row in rows] == [stays, gone]
    assert rows[0][1:4] == ["local", "ops", "stays"]
    # UTC as JSON spells it, Z (docs/cli.md, issue 59's one way per output kind).
    assert rows[1] == [removal["removed_at"], "", "ops", "removed (deleted)", gone]

    # On a terminal the removal stays a row of the table under its header.
    shown = cli(*store, "catchup", "--changes", "-c", "term", columns=100)
    header, entry, removed = shown.stdout.splitlines()
    assert header.split() == ["WHEN", "AUTHOR", "DOMAIN", "CONTENT"]
    assert entry.endswith(stays[:8]) and removed.endswith(gone[:8]) and "removed (deleted)" in removed


def test_over_a_real_serve_removals_come_through_the_extension_and_its_retention(
    cli: Callable[..., CliResult], isolated_home: Path
) -> None:
    from tests.support.serve import start_serve

    key = cli("keys", "create", "alice").stdout.strip()  # the served store: $MNEMO_HOME/store.db
    kept = start_serve(isolated_home)
    try:
        env = {"MNEMO_ENDPOINT": kept.url, "MNEMO_API_KEY": key}
        atom = cli("write", "soon gone", env=env).stdout.strip()
        assert _json(cli("catchup", "--changes", "-f", "json", env=env))["removed"] == []
        assert cli("delete", "--yes", atom, env=env).code == 0
        [removed] = _json(cli("catchup", "--changes", "-f", "json", env=env))["removed"]
        assert (removed["atom_id"], removed["reason"]) == (atom, "deleted")
    finally:
        kept.stop()
    # Served with a retention of 0 s: a removal is past it at once, and the consumer is told to re-read.
    short = start_serve(isolated_home, "--tombstone-retention", "0s")
    try:
        env = {"MNEMO_ENDPOINT": short.url, "MNEMO_API_KEY": key}
        other = cli("write", "gone while nobody looked", env=env).stdout.strip()
        assert _json(cli("catchup", "-f", "json", env=env))["items"][0]["atom_id"] == other
        assert cli("delete", "--yes", other, env=env).code == 0
        expired = cli("catchup", "--changes", env=env)
        assert expired.code == 8 and "re-read this scope" in expired.stderr, expired.stderr
        assert expired.stdout == ""
        assert "removed" not in _json(cli("catchup", "-f", "json", env=env))
    finally:
        short.stop()
    bad = cli("serve", "--port", "0", "--tombstone-retention", "later")
    assert bad.code == 2 and "--tombstone-retention" in bad.stderr


def test_a_deleted_rooms_member_hears_of_its_removal_and_then_of_nothing(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = ["--store", str(tmp_path / "s.db")]
    room = cli(*store, "rooms", "create", "team").stdout.strip()
    entry = cli(*store, "write", "in the room", "--scope", room).stdout.strip()
    assert cli(*store, "catchup", "--scope", room).code == 0
    assert cli(*store, "rooms", "delete", "--yes", room).code == 0
    [removed] = _json(cli(*store, "catchup", "--changes", "--scope", room, "-f", "json"))["removed"]
    assert (removed["atom_id"], removed["reason"], removed["scope"]) == (entry, "room_deleted", room)
    assert _json(cli(*store, "catchup", "--changes", "--scope", room, "-f", "json"))["removed"] == []
    # Without --changes the room is simply gone (exit 4), as before.
    assert cli(*store, "catchup", "--scope", room).code == 4
