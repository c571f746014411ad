"""The server's side of the streamed walk (`POST /memory/recent`, `Accept: application/x-ndjson`): lines of the
server's own pages, refusals before the stream as JSON, and a client gone stops the walk before its next page."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.engine.feed import JoinedPage
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server import walk_stream
from mnemo_tui.server.app import create_app
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.wire import ids_of, joined, served_store


def seeded(path: Path, n: int) -> str:
    store = Store(path)
    key = store.create_key("alice")[1]
    store.bulk_insert([("alice", WriteRequest(content=f"entry {i}", domain="notes"), 1_000_000 + i) for i in range(n)])
    store.close()
    return key


def test_the_walk_comes_as_pages_of_the_limit_and_refusals_come_before_it_as_json(tmp_path: Path) -> None:
    key = seeded(tmp_path / "s.db", 250)
    with served_store(tmp_path / "s.db") as server, httpx.Client(base_url=server.url, timeout=30) as client:
        ask = {"X-Api-Key": key, "Accept": "application/x-ndjson"}
        walk = client.post("/memory/recent", json={"limit": 100}, headers=ask)
        assert walk.status_code == 200
        assert walk.headers["content-type"] == "application/x-ndjson"
        assert walk.headers["x-mnemo-wire"] == "canonical"
        pages = [json.loads(line) for line in walk.content.splitlines()]
        assert [len(p["items"]) for p in pages] == [100, 100, 50]  # a line is the page the limit asks for
        assert [p["next_cursor"] is None for p in pages] == [False, False, True]
        # Each line is the JSON answer's page: its cursor continues the walk page by page.
        page = client.post(
            "/memory/recent", json={"limit": 100, "cursor": pages[0]["next_cursor"]}, headers={"X-Api-Key": key}
        )
        assert page.json()["items"] == pages[1]["items"]
        bad = client.post("/memory/recent", json={"cursor": "nope!"}, headers=ask)
        assert (bad.status_code, bad.headers["content-type"], bad.json()["code"]) == (
            400,
            "application/json",
            "VALIDATION_ERROR",
        )
        assert (
            client.post("/memory/recent", json={"limit": 101}, headers=ask).status_code == 422
        )  # the limit still ≤ 100
        assert (
            client.post("/memory/recent", json={}, headers={**ask, "X-Api-Key": "mk_live_" + "0" * 32}).status_code
            == 401
        )
        refused = client.post("/memory/recent", json={}, headers={**ask, "Accept": "application/x-ndjson;q=0"})
        assert refused.headers["content-type"] == "application/json" and len(refused.json()["items"]) == 20


def test_a_client_gone_stops_the_walk_before_its_next_page(tmp_path: Path) -> None:
    key = seeded(tmp_path / "s.db", 5000)  # fifty lines
    app = create_app(tmp_path / "s.db", workers=2)
    sent: list[dict[str, Any]] = []
    gone = asyncio.Event()
    body = json.dumps({"limit": 100}).encode()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/memory/recent",
        "raw_path": b"/api/v1/memory/recent",
        "headers": [(b"x-api-key", key.encode()), (b"accept", b"application/x-ndjson")],
        "client": ("127.0.0.1", 1),
    }
    asked = 0

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        if asked == 1:
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("body"):
            gone.set()  # the client goes away once its first line is on its way

    try:
        asyncio.run(app(scope, receive, send))
    finally:
        app.close()
    parts = [m["body"] for m in sent if m["type"] == "http.response.body" and m.get("body")]
    assert sent[0]["status"] == 200
    # The part in hand when it went (in sends of at most `walk_stream.PIECE`), never the rest of the walk.
    assert parts and all(len(part) <= walk_stream.PIECE for part in parts)
    lines = b"".join(parts).splitlines()
    assert len(lines) <= 1 + walk_stream.PART_PAGES < 50
    assert json.loads(lines[-1])["next_cursor"] is not None
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_part_is_a_few_pages_of_one_statement_and_a_part_that_fails_is_met_again_from_its_cursor(
    tmp_path: Path,
) -> None:
    seeded(tmp_path / "s.db", 2500)
    store = Store(tmp_path / "s.db")
    down = False

    class Failing:
        """The store, whose reads fail while it is down (a database that went away)."""

        def recent_wire_pages(self, who: str, query: RecentQuery, pages: int, max_bytes: int) -> list[JoinedPage]:
            if down:
                raise OSError("the database went away")
            return store.recent_wire_pages(who, query, pages, max_bytes)

    try:
        whole = walk_stream.pages(store, "alice", RecentQuery(limit=100))
        assert len(whole) == walk_stream.PART_PAGES and all(p.count == 100 for p in whole)
        # Each page is the JSON answer's page: its cursor is the one a page by page walk gets there.
        assert whole[2] == joined(store.recent_wire("alice", RecentQuery(limit=100, cursor=whole[1].next_cursor)))
        first = walk_stream.first(store, "alice", RecentQuery(limit=100))
        assert first == whole[:1]
        engine: Any = Failing()
        read = walk_stream.pages(engine, "alice", RecentQuery(limit=100))
        down = True
        with pytest.raises(OSError, match="went away"):
            walk_stream.pages(engine, "alice", RecentQuery(limit=100, cursor=read[-1].next_cursor))
        down = False
        again = walk_stream.pages(engine, "alice", RecentQuery(limit=100, cursor=read[-1].next_cursor))
        # The part from the cursor the failed one had: the JSON pages from there, nothing repeated.
        assert ids_of(again[0])[0] != ids_of(read[-1])[-1] and len(again) == walk_stream.PART_PAGES
        assert again == _json_pages(store, RecentQuery(limit=100, cursor=read[-1].next_cursor))[: len(again)]
    finally:
        store.close()


def _pages_of(store: Store, q: RecentQuery, pages: int) -> list[JoinedPage]:
    """The walk's pages read a part of `pages` pages at a time from the engine."""
    got: list[JoinedPage] = []
    cursor = None
    while True:
        part = store.recent_wire_pages("alice", q.replace(cursor=cursor), pages, walk_stream.PART_BYTES)
        got += part
        cursor = part[-1].next_cursor
        if cursor is None:
            return got


def _json_pages(store: Store, q: RecentQuery) -> list[JoinedPage]:
    """The same walk page by page, as the JSON answers' pages."""
    got = [joined(store.recent_wire("alice", q))]
    while got[-1].next_cursor is not None:
        got.append(joined(store.recent_wire("alice", q.replace(cursor=got[-1].next_cursor))))
    return got


def test_a_part_holds_the_json_pages_also_where_entries_share_a_time_at_a_page_end(tmp_path: Path) -> None:
    seeded(tmp_path / "s.db", 60)
    # A store whose entries share times (the engine's clock never stamps two alike in one bucket: one written
    # before it did, or by hand): three a time, so pages of 4 and 5 end inside a run of equal times.
    raw = sqlite3.connect(tmp_path / "s.db")
    raw.execute("UPDATE atoms SET created_at = 1000000 + (created_at - 1000000) / 3")
    raw.commit()
    raw.close()
    store = Store(tmp_path / "s.db")
    try:
        for limit in (3, 4, 5):
            for history in (False, True):
                q = RecentQuery(limit=limit, include_history=history)
                whole = _json_pages(store, q)
                assert len(whole) > 10
                for pages in (1, 2, walk_stream.PART_PAGES):
                    assert _pages_of(store, q, pages) == whole
    finally:
        store.close()


def test_a_part_holds_the_json_pages_of_every_scope_and_filter(tmp_path: Path) -> None:
    seeded(tmp_path / "s.db", 45)
    store = Store(tmp_path / "s.db")
    try:
        first = store.write("alice", WriteRequest(content="old \N{GRINNING FACE} version", domain="notes")).atom_id
        store.write("alice", WriteRequest(content="new version", domain="notes", supersedes=(first,)))
        store.write("alice", WriteRequest(content="elsewhere", domain="other"))
        for q in (
            RecentQuery(limit=7),
            RecentQuery(limit=7, include_history=True),  # the replaced entry, `superseded_by` spliced in by SQL
            RecentQuery(limit=10, scope="notes", since=1_000_010),
            RecentQuery(limit=100, scope="other"),
        ):
            assert _pages_of(store, q, 3) == _json_pages(store, q)
    finally:
        store.close()


def test_a_part_leaves_the_connection_its_page_cache_and_string_limit(tmp_path: Path) -> None:
    seeded(tmp_path / "s.db", 30)
    store = Store(tmp_path / "s.db")
    try:
        store.db.execute("PRAGMA cache_size = -3000")
        limit = store.db.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        assert len(_pages_of(store, RecentQuery(limit=4), 3)) == 8
        # The walk's small cache (a walk reads each page once) and its string bound were the part's only.
        assert store.db.execute("PRAGMA cache_size").fetchone()[0] == -3000
        assert store.db.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == limit
    finally:
        store.close()
