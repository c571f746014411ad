"""The server's side of the streamed walk (`POST /memory/recent`, `Accept: application/x-ndjson`): lines of the
server's own pages, refusals before the stream as JSON, and a client gone stops the walk before its next page."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server import streamed, walk_stream
from mnemo_tui.server.app import create_app
from mnemo_tui.values.model import RecentQuery, WirePage
from mnemo_tui.values.writes import WriteRequest
from tests.support.wire import served_store


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
    # The part in hand when it went (in sends of at most `streamed.PIECE`), never the rest of the walk.
    assert parts and all(len(part) <= streamed.PIECE for part in parts)
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

        def recent_wire_pages(self, who: str, query: RecentQuery, pages: int, max_bytes: int) -> list[WirePage]:
            if down:
                raise OSError("the database went away")
            return store.recent_wire_pages(who, query, pages, max_bytes)

    try:
        whole = walk_stream.pages(store, "alice", RecentQuery(limit=100))
        assert len(whole) == walk_stream.PART_PAGES and all(len(p.items) == 100 for p in whole)
        # Each page is the JSON answer's page: its cursor is the one a page by page walk gets there.
        assert whole[2] == store.recent_wire("alice", RecentQuery(limit=100, cursor=whole[1].next_cursor))
        first = walk_stream.first(store, "alice", RecentQuery(limit=100))
        assert first == whole[:1]
        engine: Any = Failing()
        read = walk_stream.pages(engine, "alice", RecentQuery(limit=100))
        down = True
        with pytest.raises(OSError, match="went away"):
            walk_stream.pages(engine, "alice", RecentQuery(limit=100, cursor=read[-1].next_cursor))
        down = False
        again = walk_stream.pages(engine, "alice", RecentQuery(limit=100, cursor=read[-1].next_cursor))
        assert again[0].items[0] != read[-1].items[-1] and len(again) == 9  # the rest of the 2,500: 9 pages
        assert again[-1].next_cursor is None and len(again[-1].items) == 100
    finally:
        store.close()
