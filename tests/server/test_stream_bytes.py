"""Streams bounded in bytes (issue 50): a streamed walk's part and a follow event hold at most a documented number of
bytes as well as of entries, read up to that bound by the engine (SQLite and PostgreSQL), and nothing is lost or
repeated across the cuts; plain JSON pages keep exactly `limit` items."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.engine.feed import JoinedPage, item_bytes
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.server import follow, routes, walk_stream
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import client, following, write
from tests.support.targets import Target
from tests.support.wire import joined, served_store

FAT = "\N{GRINNING FACE}" * 10_000  # content at its bound, four bytes a character: a 40 KB entry


def _sized(i: int) -> str:
    """Entries of very different sizes, so the cuts fall anywhere in a page."""
    return FAT[: 10_000 - i] if i % 3 else f"thin {i}"


def _seed(engine: Any, n: int, at: int = 1_000_000) -> None:
    engine.bulk_insert([("alice", WriteRequest(content=_sized(i), domain="notes"), at + i) for i in range(n)])


def _bytes(items: list[str]) -> int:
    return sum(item_bytes(item) for item in items)


def test_the_engine_reads_a_walk_part_up_to_its_byte_bound_and_the_cursors_continue_exactly(target: Target) -> None:
    engine = target.open()
    try:
        _seed(engine, 60)
        first = engine.write("alice", WriteRequest(content=FAT[:9000], domain="notes")).atom_id
        engine.write("alice", WriteRequest(content=FAT[:9001], domain="notes", supersedes=(first,)))
        for history in (False, True):  # with history, `superseded_by` is spliced in, and counted
            q = RecentQuery(limit=7, include_history=history)
            every = [wire for chunk in engine.stream_wire("alice", q) for wire in chunk]
            assert len(every) == (62 if history else 61)
            bound, walked, cursor, parts = 150_000, [], None, 0
            while True:
                part = engine.recent_wire_pages("alice", q.replace(cursor=cursor), 4, bound)
                parts += 1
                count = sum(page.count for page in part)
                # never past the bound but for one entry (a page's items: their text, a comma each)
                assert sum(len(page.items) + 1 for page in part) <= bound or count == 1
                assert all(page.count == 7 for page in part[:-1]) and 1 <= part[-1].count <= 7
                assert all(page.next_cursor is not None for page in part[:-1])
                # each page as the JSON answer's page from the same cursor, cut where the bound cut it
                page = engine.recent_wire("alice", q.replace(cursor=cursor))
                assert part[0] == joined(page) or part[0].items == ",".join(page.items[: part[0].count]).encode()
                walked += [page.items for page in part]
                cursor = part[-1].next_cursor
                if cursor is None:
                    break
            assert b",".join(walked) == ",".join(every).encode()  # nothing lost or repeated across the cut parts
            assert parts > 62 * 40_000 // bound // 2  # the bound cut them, not the pages' count
            # A plain page keeps exactly `limit` items, however large.
            page = engine.recent_wire("alice", q)
            assert len(page.items) == 7 and _bytes(page.items) > 7 * 20_000
        assert engine.recent_wire_pages("bob", RecentQuery(limit=7), 4, 1000) == [JoinedPage(b"", 0, None)]
    finally:
        engine.close()


def test_a_json_page_is_the_row_by_row_page_exactly_and_never_cut_short(target: Target) -> None:
    # The endpoint's page is read joined (`routes.recent`, one value a page on SQLite); it must be, byte for byte,
    # the page read row by row (`recent_wire`), at any size: `limit` items, whatever their bytes.
    engine = target.open()
    try:
        _seed(engine, 40)
        first = engine.write("alice", WriteRequest(content=FAT[:9000], domain="notes")).atom_id
        engine.write("alice", WriteRequest(content=FAT[:9001], domain="notes", supersedes=(first,)))
        for history in (False, True):
            cursor, pages = None, 0
            while True:
                body = {"limit": 9, "include_history": history, **({"cursor": cursor} if cursor else {})}
                answer = routes.recent(engine, "alice", routes.Call(json.dumps(body).encode()))
                page = engine.recent_wire("alice", RecentQuery(limit=9, include_history=history, cursor=cursor))
                items, after = ",".join(page.items), json.dumps(page.next_cursor)
                assert answer == f'{{"items":[{items}],"next_cursor":{after}}}'.encode()
                assert len(page.items) == 9 or page.next_cursor is None
                pages += 1
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert pages == (42 if history else 41) // 9 + 1
        assert routes.recent(engine, "bob", routes.Call(b'{"limit": 5}')) == b'{"items":[],"next_cursor":null}'
    finally:
        engine.close()


def test_the_engine_reads_a_follow_window_up_to_its_byte_bound_with_nothing_lost(target: Target) -> None:
    engine = target.open()
    try:
        _seed(engine, 40)
        q = RecentQuery(scope="notes")
        upto = 1_000_000 + 39
        whole, more = engine.entries_after("alice", q, 0, upto, 1000)
        assert len(whole) == 40 and more is False
        assert engine.entries_after("alice", q, 0, upto, 39)[1] is True
        bound, got, after = 100_000, [], 0
        while True:
            rows, more = engine.entries_after("alice", q, after, upto, 100, bound)
            assert _bytes([wire for _, wire in rows]) <= bound or len(rows) == 1
            got += rows
            if not more:
                break
            after = rows[-1][0]
        assert got == whole
        assert engine.page_start("alice", RecentQuery(scope="notes", limit=5), upto) == upto - 5
        assert engine.page_start("alice", RecentQuery(scope="notes", limit=100), upto) == 0
    finally:
        engine.close()


def _fat_store(path: Path, n: int) -> str:
    store = Store(path)
    key = store.create_key("alice")[1]
    store.bulk_insert([("alice", WriteRequest(content=FAT, domain="notes"), 1_000_000 + i) for i in range(n)])
    store.close()
    return key


def test_a_streamed_walk_of_fat_entries_comes_in_lines_within_the_part_bound(tmp_path: Path) -> None:
    key = _fat_store(tmp_path / "s.db", 150)  # 40 KB entries: a page of 100 is 4 MiB, four times a part
    with served_store(tmp_path / "s.db") as server, httpx.Client(base_url=server.url, timeout=60) as http:
        ask = {"X-Api-Key": key, "Accept": "application/x-ndjson"}
        walk = http.post("/memory/recent", json={"limit": 100}, headers=ask)
        lines = walk.content.splitlines()
        assert all(len(line) + 1 <= walk_stream.PART_BYTES for line in lines)
        pages = [json.loads(line) for line in lines]
        ids = [item["atom_id"] for page in pages for item in page["items"]]
        assert len(ids) == len(set(ids)) == 150  # nothing lost or repeated where the parts were cut
        assert len(pages) > 4 and all(page["next_cursor"] for page in pages[:-1]) and not pages[-1]["next_cursor"]
        # A short line's cursor continues exactly, and a plain page from it keeps its `limit`.
        plain = http.post(
            "/memory/recent", json={"limit": 100, "cursor": pages[0]["next_cursor"]}, headers={"X-Api-Key": key}
        ).json()
        assert [item["atom_id"] for item in plain["items"]] == ids[len(pages[0]["items"]) :][:100]
        assert len(plain["items"]) == 100
        # The client walks the short lines as any (its checks of order, repeats and cursors hold).
        backend = RemoteBackend(server.url, key)
        try:
            walked = [entry.atom_id for page in backend.walk_pages(RecentQuery(limit=100)) for entry in page.items]
        finally:
            backend.close()
        assert walked == ids
    store = Store(tmp_path / "s.db")
    try:  # a part, all its lines together, is within the bound
        part = walk_stream.pages(store, "alice", RecentQuery(limit=100))
        assert sum(map(len, walk_stream.sends(part))) <= walk_stream.PART_BYTES
        assert len(part) == 1 and 20 < part[0].count < 100
    finally:
        store.close()


def test_follow_events_of_fat_entries_stay_within_the_event_bound_and_every_entry_arrives(tmp_path: Path) -> None:
    key = _fat_store(tmp_path / "s.db", 100)
    newest = Store(tmp_path / "s.db")
    try:
        first_page = [wire for chunk in newest.stream_wire("alice", RecentQuery(limit=100)) for wire in chunk]
    finally:
        newest.close()
    first_ids = [json.loads(wire)["atom_id"] for wire in first_page]

    async def scenario(url: str) -> None:
        async with client() as c, following(c, url, key, {"limit": 100}) as stream:
            got: list[str] = []
            while len(got) < 100:  # the newest page: its events oldest part first, newest first in each
                found = await stream.next()
                assert found is not None and found.name == "entries"
                got = found.ids + got
            assert got == first_ids and len(stream.events) > 3  # cut by the bound into several events
            written = [await write(c, url, key, FAT[: 10_000 - i], "notes") for i in range(60)]
            events = await stream.until(set(written))
            pushed = [i for e in events for i in reversed(e.ids)]
            assert pushed == written  # every entry once, in order
            for e in stream.events:
                data = json.dumps(e.data, ensure_ascii=False, separators=(",", ":")).encode()
                assert len(data) <= follow.EVENT_BYTES + 16 or len(e.ids) == 1

    with served_store(tmp_path / "s.db") as server:
        asyncio.run(scenario(server.url))


def test_a_walk_part_refuses_what_a_page_refuses_and_reads_a_room_as_a_page_does(target: Target) -> None:
    engine = target.open()
    try:
        with pytest.raises(Forbidden):
            engine.recent_wire_pages("alice", RecentQuery(scope="xroom:room_01ARZ3NDEKTSV4RRFFQ69G5FAV"), 4, 1 << 20)
        with pytest.raises(ValidationError):
            engine.recent_wire_pages("alice", RecentQuery(cursor="AAAA"), 4, 1 << 20)
        room = engine.create_room("alice", "fat room")
        scope = f"xroom:{room.room_id}"
        for i in range(12):
            engine.write("alice", WriteRequest(content=_sized(i), domain=scope))
        q = RecentQuery(scope=scope, limit=5)
        part = engine.recent_wire_pages("alice", q, 2, 1 << 20)
        assert part == [
            joined(engine.recent_wire("alice", q)),
            joined(engine.recent_wire("alice", q.replace(cursor=part[0].next_cursor))),
        ]
        assert part[-1].next_cursor is not None
        with pytest.raises(Forbidden):
            engine.recent_wire_pages("bob", q, 2, 1 << 20)
    finally:
        engine.close()
