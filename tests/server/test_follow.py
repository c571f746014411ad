"""`POST /memory/follow` over real HTTP (the app under uvicorn in this process, a temp store): the start forms,
wake-ups, an exact resume, heartbeats, refusals and bounds (docs/server.md, "Push follow")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.engine.follow import FollowOps
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.engine.tombstones import TombstoneOps
from mnemo_tui.server import follow as follow_module
from mnemo_tui.server import wake
from mnemo_tui.server.app import create_app
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import Event, client, delete, following, write
from tests.support.wire import serving


@contextmanager
def served(tmp_path: Path, **options: Any) -> Iterator[tuple[str, dict[str, str], Path]]:
    path = tmp_path / "served.db"
    store = Store(path)
    keys = {p: store.create_key(p)[1] for p in ("alice", "bob", "carol")}
    store.close()
    with serving(create_app(path, **options)) as server:
        yield server.url, keys, path


def run(main: Callable[[], Any]) -> Any:
    return asyncio.run(main())


async def written_then_followed(c: httpx.AsyncClient, url: str, key: str, *contents: str) -> tuple[list[str], Event]:
    """`contents` written, then a follow started and closed: their ids, and its first event (the newest page, whose
    id is a position to resume from)."""
    ids = [await write(c, url, key, content) for content in contents]
    async with following(c, url, key) as s:
        start = await s.next()
    assert start is not None and start.id is not None
    return ids, start


def test_the_newest_page_then_a_write_wakes_the_follower(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, _):
        alice = keys["alice"]

        async def main() -> None:
            async with client() as c:
                first = [await write(c, url, alice, f"old {n}") for n in range(3)]
                async with following(c, url, alice, {"limit": 2}) as s:
                    assert s.response.status_code == 200
                    assert s.response.headers["content-type"] == "text/event-stream; charset=utf-8"
                    assert s.response.headers["cache-control"] == "no-store"
                    assert s.response.headers["x-accel-buffering"] == "no"
                    page = await s.next()
                    assert s.retry == 2000  # first, before any event
                    assert page is not None and page.name == "entries" and page.ids == [first[2], first[1]]
                    assert page.id is not None and page.id > 0
                    new = await write(c, url, alice, "new one")
                    (woken,) = await s.until({new})
                    assert woken.name == "entries" and woken.ids == [new] and woken.id is not None
                    assert woken.id > page.id
                    assert woken.data["items"][0]["content"] == "new one"

        run(main)


def test_an_empty_scope_starts_at_zero_and_a_domain_sees_only_its_own(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, _):
        alice = keys["alice"]

        async def main() -> None:
            async with client() as c, following(c, url, alice, {"domain": "work"}) as s:
                start = await s.next()
                assert start is not None and start.name == "entries" and start.ids == [] and start.id == 0
                await write(c, url, alice, "elsewhere", domain="home")
                mine = await write(c, url, alice, "here", domain="work")
                (woken,) = await s.until({mine})
                assert woken.ids == [mine]  # the other domain's entry was never sent

        run(main)


def test_since_sends_every_entry_from_it_in_chunks_newest_first_within_each(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, path):
        store = Store(path)
        rows = [("alice", WriteRequest(content=f"bulk {n}"), 1_700_000_000_000_000 + n) for n in range(250)]
        store.bulk_insert(rows)
        store.close()

        async def main() -> None:
            async with client() as c, following(c, url, keys["alice"], {"since": "2023-11-14T22:13:20.000010Z"}) as s:
                got: list[Event] = []
                while sum(len(e.ids) for e in got) < 240:
                    found = await s.next()
                    assert found is not None
                    got.append(found)
                assert all(e.name == "entries" and len(e.ids) <= 100 for e in got)
                times = [[item["created_at"] for item in e.data["items"]] for e in got]
                assert all(t == sorted(t, reverse=True) for t in times)  # newest first within an event
                flat = [t for chunk in reversed(times) for t in chunk]
                assert flat == sorted(flat, reverse=True) and len(set(flat)) == 240  # exactly once, from `since` on
                ids = [e.id for e in got]
                assert ids == sorted(ids) and len(set(ids)) == len(ids)

        run(main)


def test_a_resume_after_writes_and_deletes_gives_each_change_after_the_position_exactly_once(tmp_path: Path) -> None:
    with served(tmp_path, heartbeat_seconds=0.3) as (url, keys, _):
        alice = keys["alice"]

        async def main() -> None:
            async with client() as c:
                (kept, doomed), start = await written_then_followed(c, url, alice, "before", "doomed")
                assert set(start.ids) == {kept, doomed}
                position = start.id
                # Changes while nobody follows: three writes, a delete of an old entry and of a new one.
                new = [await write(c, url, alice, f"while away {n}") for n in range(3)]
                await delete(c, url, alice, doomed)
                await delete(c, url, alice, new[1])
                async with following(c, url, alice, last_id=position) as s:
                    got = await s.until({new[0], new[2], doomed, new[1]})
                    entries = [i for e in got if e.name == "entries" for i in e.ids]
                    removed = [i for e in got if e.name == "removed" for i in e.ids]
                    # new[1] was deleted before the resume read it: only its removal comes.
                    assert sorted(entries) == sorted([new[0], new[2]]) and len(entries) == 2
                    assert removed == [doomed, new[1]]  # oldest first
                    last = got[-1].id
                    beat = await s.next()  # nothing more: a heartbeat at the same position
                    assert beat is not None and beat.name == "heartbeat" and beat.id == last and beat.data == {}
                async with following(c, url, alice, last_id=last) as s:
                    again = await s.next()
                    assert again is not None and again.name == "heartbeat" and again.id == last

        run(main)


def test_a_write_and_delete_between_wakes_come_in_order_of_their_instants(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, path):
        alice = keys["alice"]

        async def main() -> None:
            async with client() as c, following(c, url, alice) as s:
                start = await s.next()
                assert start is not None
                # Written and deleted outside the server (no wake of its own): the probe finds them as one window.
                store = Store(path, create=False)
                try:
                    a = store.write("alice", WriteRequest(content="a")).atom_id
                    store.delete("alice", a)
                    b = store.write("alice", WriteRequest(content="b")).atom_id
                finally:
                    store.close()
                got = await s.until({a, b})
                assert [(e.name, e.ids) for e in got] == [("removed", [a]), ("entries", [b])]
                assert got[0].id is not None and got[1].id is not None and start.id is not None
                assert start.id < got[0].id < got[1].id

        run(main)


def test_refusals_come_as_the_json_envelope_before_any_stream(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, _):
        alice = keys["alice"]

        async def main() -> None:
            async with client() as c:
                cases: list[tuple[dict[str, Any], Any, str, int]] = [
                    ({}, "12a", "", 422),
                    ({}, "-1", "", 422),
                    ({}, "1" * 25, "", 422),
                    ({"cursor": "abc"}, None, "", 422),
                    ({"until": "2030-01-01T00:00:00Z"}, None, "", 422),
                    ({"limit": 0}, None, "", 422),
                    ({"domain": "xroom:room_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, None, "", 403),
                    ({}, None, "mk_live_nobody_x", 401),
                ]
                for body, last_id, key, status in cases:
                    async with following(c, url, key or alice, body, last_id) as s:
                        raw = await s.response.aread()
                        assert s.response.status_code == status, (body, last_id, raw)
                        assert s.response.headers["content-type"].startswith("application/json")
                        assert b'"code"' in raw

        run(main)


def test_a_stranger_gets_401_before_the_body_is_read(tmp_path: Path) -> None:
    with served(tmp_path) as (url, _keys, _):

        async def main() -> None:
            async with client() as c:
                answer = await c.post(url + "/memory/follow", content=b"not json at all")
                assert answer.status_code == 401

        run(main)


def test_the_server_and_key_bounds_refuse_with_retry_after_and_a_closed_stream_frees_its_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow_module, "MAX_FOLLOWS_PER_KEY", 1)
    with served(tmp_path, max_follows=2) as (url, keys, _):

        async def main() -> None:
            async with client() as c:
                async with following(c, url, keys["alice"]) as first:
                    assert (await first.next()) is not None
                    async with following(c, url, keys["alice"]) as second:
                        assert second.response.status_code == 429
                        assert second.response.headers["retry-after"]
                        assert (await second.response.aread()).find(b"TOO_MANY_FOLLOWS") > 0
                    async with following(c, url, keys["bob"]) as other:
                        assert (await other.next()) is not None
                        async with following(c, url, keys["carol"]) as third:  # the server's bound
                            assert third.response.status_code == 503
                            assert third.response.headers["retry-after"]
                            body = await third.response.aread()
                            assert b"UNAVAILABLE" in body and b'"retryable":true' in body
                # Both closed: the server hears the disconnects and frees the slots (bounded wait).
                for _ in range(200):
                    async with following(c, url, keys["alice"]) as again:
                        if again.response.status_code == 200:
                            return
                        await again.response.aread()
                    await asyncio.sleep(0.05)
                raise AssertionError("the closed follows' slots were never freed")

        run(main)


def test_a_deleted_room_sends_its_removals_then_ends_the_stream_with_403(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, _):
        alice, bob = keys["alice"], keys["bob"]

        async def main() -> None:
            async with client() as c:
                h_alice, h_bob = {"X-Api-Key": alice}, {"X-Api-Key": bob}
                room = (await c.post(url + "/memory/rooms", json={"name": "team"}, headers=h_alice)).json()
                invite = await c.post(url + f"/memory/rooms/{room['room_id']}/invites", json={}, headers=h_alice)
                joined = await c.post(url + "/memory/rooms/join", json={"code": invite.json()["code"]}, headers=h_bob)
                assert joined.status_code == 200, joined.text
                address = "xroom:" + room["room_id"]
                async with following(c, url, bob, {"domain": address}) as s:
                    assert (await s.next()) is not None
                    said = await write(c, url, alice, "in the room", domain=address)
                    await s.until({said})
                    gone = await c.delete(url + f"/memory/rooms/{room['room_id']}", headers=h_alice)
                    assert gone.status_code == 200, gone.text
                    (removed,) = await s.until({said})
                    assert removed.name == "removed" and removed.data["removed"][0]["reason"] == "room_deleted"
                    end = await s.next()
                    assert end is not None and end.name == "error" and end.id is None
                    assert end.data["error"]["code"] == "FORBIDDEN" and end.data["error"]["status"] == 403
                    assert await s.next() is None and s.ended  # the stream ended
                    last = removed.id
                # The former member resumes from its last position: nothing after it, then the 403.
                async with following(c, url, bob, {"domain": address}, last_id=last) as s:
                    end = await s.next()
                    assert end is not None and end.name == "error" and end.data["error"]["code"] == "FORBIDDEN"
                # And a follow from scratch is refused before any stream.
                async with following(c, url, bob, {"domain": address}) as s:
                    assert s.response.status_code == 403

        run(main)


def test_a_writer_outside_the_server_wakes_the_follower_through_the_change_token(tmp_path: Path) -> None:
    with served(tmp_path) as (url, keys, path):

        async def main() -> None:
            async with client() as c, following(c, url, keys["alice"]) as s:
                assert (await s.next()) is not None
                store = Store(path, create=False)  # another connection: what `mnemo write` on the file is
                try:
                    atom = store.write("alice", WriteRequest(content="from outside")).atom_id
                finally:
                    store.close()
                (woken,) = await s.until({atom})
                assert woken.name == "entries"

        run(main)


def test_every_write_path_of_the_server_wakes_its_followers_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The change token is read once an hour: only the server's own wake-ups can deliver within the test's wait.
    monkeypatch.setattr(wake, "SQLITE_PROBE_SECONDS", 3600.0)
    with served(tmp_path, allow_reset=True) as (url, keys, _):
        alice = keys["alice"]
        h = {"X-Api-Key": alice}

        async def main() -> None:
            async with client() as c, following(c, url, alice) as s:
                assert (await s.next()) is not None
                batch = await c.post(
                    url + "/memory/write-batch",
                    json={"items": [{"content": "b1", "domain": "ops"}, {"content": "b2", "domain": "ops"}]},
                    headers=h,
                )
                assert batch.status_code == 200, batch.text
                two = [r["atom_id"] for r in batch.json()["results"]]
                await s.until(set(two))
                single = await write(c, url, alice, "single", domain="notes")
                await s.until({single})
                await delete(c, url, alice, single)
                (one,) = await s.until({single})
                assert one.name == "removed" and one.data["removed"][0]["reason"] == "deleted"
                wiped = await c.delete(url + "/memory/domain/ops", headers=h)
                assert wiped.status_code == 200, wiped.text
                (wipe,) = await s.until(set(two))
                assert wipe.name == "removed" and {r["reason"] for r in wipe.data["removed"]} == {"domain_wiped"}
                last = await write(c, url, alice, "last", domain="notes")
                await s.until({last})
                reset = await c.delete(url + "/memory/reset", headers=h)
                assert reset.status_code == 200, reset.text
                (cleared,) = await s.until({last})
                assert cleared.name == "removed" and cleared.data["removed"][0]["reason"] == "reset"

        run(main)


def test_an_idle_domain_of_a_busy_store_advances_its_position_on_heartbeats(tmp_path: Path) -> None:
    with served(tmp_path, heartbeat_seconds=0.3) as (url, keys, _):
        alice = keys["alice"]

        async def main() -> None:
            async with client() as c, following(c, url, alice, {"domain": "quiet"}) as s:
                start = await s.next()
                assert start is not None and start.id == 0
                await write(c, url, alice, "elsewhere", domain="busy")
                for _ in range(50):  # heartbeats until one carries the bucket's newer position
                    beat = await s.next()
                    assert beat is not None and beat.name == "heartbeat", beat
                    if beat.id:
                        break
                assert beat.id is not None and beat.id > 0

        run(main)


def test_a_resume_from_before_the_kept_removals_ends_with_removals_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TombstoneOps, "tombstone_retention", 0)  # every tombstone is dropped at the next delete
    with served(tmp_path) as (url, keys, _):
        alice = keys["alice"]

        async def main() -> None:
            async with client() as c:
                (first, second), start = await written_then_followed(c, url, alice, "one", "two")
                await delete(c, url, alice, first)
                await delete(c, url, alice, second)  # drops the first's tombstone
                async with following(c, url, alice, last_id=start.id) as s:
                    end = await s.next()
                    assert end is not None and end.name == "error" and end.id is None
                    assert end.data["error"]["code"] == "REMOVALS_GONE" and end.data["error"]["status"] == 410
                    assert await s.next() is None

        run(main)


def test_a_follower_whose_bucket_did_not_move_reads_nothing_of_its_own_on_a_wake_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    original = FollowOps.position

    def counted(self: FollowOps, principal: str, scope: str | None) -> tuple[int, bool, int | None]:
        reads.append(principal)
        return original(self, principal, scope)

    monkeypatch.setattr(FollowOps, "position", counted)
    with served(tmp_path) as (url, keys, _):
        alice, bob = keys["alice"], keys["bob"]

        async def main() -> None:
            async with client() as c:
                await write(c, url, alice, "alice has a bucket")
                async with following(c, url, alice) as quiet, following(c, url, bob) as busy:
                    assert (await quiet.next()) is not None and (await busy.next()) is not None
                    before = reads.count("alice")
                    for n in range(5):  # each wakes the hub: one read of both buckets' clocks, then bob's own
                        await busy.until({await write(c, url, bob, f"bob {n}")})
                    assert reads.count("alice") == before  # alice's bucket never moved
                    assert reads.count("bob") >= 5
                    mine = await write(c, url, alice, "now alice")
                    await quiet.until({mine})
                    assert reads.count("alice") > before

        run(main)
