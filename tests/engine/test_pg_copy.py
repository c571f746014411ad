"""`mnemo db copy`: an embedded store moved into PostgreSQL exactly, proved by `mnemo verify` over both, by a cursor
issued by the store continuing on the database, and by the consumers' watermarks going on there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support import pg as pg_helpers
from tests.support.cli import CliResult

TABLES = ("buckets", "atoms", "rooms", "members", "invites", "vault", "api_keys", "feedback", "idempotency", "meta")


def _fill(path: Path) -> dict[str, Any]:
    store = Store(path)
    try:
        ids = [
            store.write("local", WriteRequest(content=f"note {i} on deploys", domain=f"d{i % 3}")).atom_id
            for i in range(25)
        ]
        newer = store.write("local", WriteRequest(content="deploys, revised", domain="d0", supersedes=(ids[0],)))
        room = store.create_room("local", "team")
        code = store.create_invite("local", room.room_id, max_uses=3).code
        store.join("bob", code)
        store.write("bob", WriteRequest(content="bob in the room", domain=room.address))
        store.vault_add("local", "db-pass", "the staging database", "c2VhbGVk")
        key = store.create_key("local")[1]
        store.feedback("local", [ids[3], ids[4]], 0.5)
        store.write_batch_once("local", "idem-1", [], lambda _: '{"ok":true}')
        page = store.recent("local", RecentQuery(limit=10))
        return {"ids": ids, "newer": newer.atom_id, "room": room, "key": key, "page": page}
    finally:
        store.close()


def _rows(engine: Any, table: str) -> list[tuple[Any, ...]]:
    columns = {
        "atoms": "seq, atom_id, bucket, domain, created_at, content, concepts, metadata, principal, wire, superseded_by",
        "meta": "key, value",
    }.get(table, "*")
    with engine.reading() as db:
        rows = db.execute(f"SELECT {columns} FROM {table}").fetchall()
    return sorted(tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows)


def test_a_store_copied_into_postgres_is_the_same_store(
    tmp_path: Path, pg_databases: Any, cli: Callable[..., CliResult]
) -> None:
    path = tmp_path / "store.db"
    filled = _fill(path)
    assert cli("--store", str(path), "catchup", "--limit", "5").code == 0  # a consumer's watermark on the store
    name = pg_databases.empty()
    url = pg_databases.cluster.url(name)

    copied = cli("db", "copy", "--from", str(path), "--to", url, "--format", "json")
    assert copied.code == 0, copied.stderr
    report = json.loads(copied.stdout)
    assert report["copied"]["atoms"] == 27 and report["state_carried"] >= 1
    assert pg_helpers.PASSWORD not in copied.stdout + copied.stderr

    store, pg = Store(path), PgStore(url)
    try:
        for table in TABLES:  # row for row, ids, times and the cursor secret included
            assert _rows(store, table) == _rows(pg, table), table
        # A cursor the store issued continues on the database.
        first = filled["page"]
        assert first.next_cursor is not None
        rest_store = store.recent("local", RecentQuery(limit=100, cursor=first.next_cursor))
        rest_pg = pg.recent("local", RecentQuery(limit=100, cursor=first.next_cursor))
        assert rest_store == rest_pg and len(rest_pg.items) == 15
        assert pg.principal_for_key(filled["key"]) == "local"
        assert pg.list_rooms("bob")[0].room_id == filled["room"].room_id
        assert pg.vault_sealed("local", "db-pass") == "c2VhbGVk"
        assert {h.entry.atom_id for h in pg.search("local", SearchQuery(query="revised"))} == {filled["newer"]}
        assert pg.remembered("local", "idem-1") == '{"ok":true}'
        # The clocks moved too: a new entry is stamped after every copied one.
        last = max(e.created_at for e in store.recent("local", RecentQuery(limit=1, include_history=True)).items)
        assert pg.write("local", WriteRequest(content="after the move", domain="d0")).atom_id
        assert pg.recent("local", RecentQuery(limit=1)).items[0].created_at > last
    finally:
        store.close()
        pg.close()

    # mnemo verify over both: every entry of the store walked once on the database.
    listed = cli("--store", str(path), "recent", "--all", "--format", "ndjson")
    assert listed.code == 0
    (tmp_path / "ids.ndjson").write_text(listed.stdout)
    for where in (("--store", str(path)), ("--database", url)):
        verified = cli(*where, "verify", "--expect", str(tmp_path / "ids.ndjson"), "--format", "json")
        body = json.loads(verified.stdout)
        assert body["missing"] == [] and body["repeated"] == [], (where, body)
    # The consumer's watermark went with the store: its catch-up on the database finds only the new entry.
    caught = cli("--database", url, "catchup", "--format", "ndjson")
    assert caught.code == 0, caught.stderr
    assert [json.loads(line)["content"] for line in caught.stdout.splitlines()] == ["after the move"]

    again = cli("db", "copy", "--from", str(path), "--to", url)
    assert again.code == 2 and "already holds data" in again.stderr
    missing = cli("db", "copy", "--from", str(tmp_path / "nope.db"), "--to", url)
    assert missing.code == 2 and "no such store" in missing.stderr
