"""`POST /memory/removals` in pages (issue 50): `limit` and `next`, the whole window up to a cap for a request
without `limit` and a 422 asking for it past that, and a follow's `removed` events at most 100 removals each;
on both engines, through a real server."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from mnemo_tui.server import removals_route
from mnemo_tui.values.writes import WriteRequest
from tests.support.follow import client, following
from tests.support.targets import Target
from tests.support.wire import serving_app

WIPED = 250  # one domain wipe: every tombstone of it at one instant, more than a follow event carries


def _filled(target: Target) -> tuple[str, list[dict[str, Any]], list[str]]:
    """alice's key, every removal of her store as the wire gives it (oldest first), and the entries kept."""
    engine = target.open()
    try:
        _key_id, key = engine.create_key("alice")
        notes = [engine.write("alice", WriteRequest(content=f"note {i}", domain="notes")).atom_id for i in range(8)]
        for i in range(WIPED):
            engine.write("alice", WriteRequest(content=f"bulk {i}", domain="bulk"))
        for atom in notes[:5]:
            assert engine.delete("alice", atom) == 1
        assert engine.delete_domain("alice", "bulk").deleted == WIPED
        engine.delete("alice", notes[5])
        every = [r.wire() for r in engine.removals("alice", None, None).items]
    finally:
        engine.close()
    assert len(every) == WIPED + 6
    return key, every, notes[6:]


def _post(http: httpx.Client, key: str, body: dict[str, Any]) -> httpx.Response:
    return http.post("/memory/removals", json=body, headers={"X-Api-Key": key})


def test_removals_come_in_pages_and_a_request_without_limit_gets_them_whole_up_to_the_cap(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, every, _kept = _filled(target)
    with serving_app(target.app()) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        pages: list[list[dict[str, Any]]] = []
        position = None
        for _ in range(100):
            answer = _post(http, key, {"limit": 7, "next": position})
            assert answer.status_code == 200, answer.text
            pages.append(answer.json()["removed"])
            position = answer.json()["next"]
            if position is None:
                break
        assert [r for page in pages for r in page] == every  # nothing lost or repeated, inside the wipe's instant too
        assert [len(p) for p in pages[:-1]] == [7] * (len(pages) - 1) and 0 < len(pages[-1]) <= 7
        # A page keeps its window: `after` and `upto` hold on every page.
        low, high = every[2]["removed_at"], every[-2]["removed_at"]
        first = _post(http, key, {"after": low, "upto": high, "limit": 4}).json()
        rest = _post(http, key, {"after": low, "upto": high, "limit": 1000, "next": first["next"]}).json()
        assert first["removed"] + rest["removed"] == [r for r in every if low < r["removed_at"] <= high]
        assert rest["next"] is None

        # Without `limit` (an older client): today's answer while the window fits the cap...
        monkeypatch.setattr(removals_route, "UNPAGED", len(every))
        whole = _post(http, key, {})
        assert whole.status_code == 200 and whole.json() == {"removed": every, "next": None}
        # ... and past it a 422 that asks for `limit`, never a part of the window.
        monkeypatch.setattr(removals_route, "UNPAGED", len(every) - 1)
        refused = _post(http, key, {})
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "VALIDATION_ERROR" and "limit" in refused.json()["message"]
        assert refused.json()["details"]["reason"] == "limit_required"
        for bad in ({"limit": 0}, {"limit": 1001}, {"limit": "5"}):
            assert _post(http, key, bad).status_code == 422, bad
        # A `next` no page handed out is what the schema cannot say: 400, as a forged cursor is.
        forged = _post(http, key, {"limit": 5, "next": "not a position"})
        assert forged.status_code == 400 and forged.json()["code"] == "VALIDATION_ERROR", forged.text


def test_a_follow_resumed_from_zero_gets_its_removals_at_most_100_an_event(target: Target) -> None:
    key, every, kept = _filled(target)
    ids = [r["atom_id"] for r in every]

    async def main() -> None:
        async with client() as c:
            async with following(c, server.url, key, last_id=0) as s:
                got = await s.until(set(ids) | set(kept))
            removed = [e for e in got if e.name == "removed"]
            assert all(len(e.ids) <= 100 for e in removed) and len(removed) >= WIPED // 100 + 1
            assert [i for e in removed for i in e.ids] == ids  # oldest first, each once
            positions = [e.id or 0 for e in got]
            assert positions == sorted(positions)
            # An event cut inside the wipe's instant completes only the instant before: resumed from it, the
            # stream hears that instant's removals again and misses none.
            wipe_at = every[-2]["removed_at"]
            cut = next(e for e in removed if e.data["removed"][-1]["removed_at"] == wipe_at)
            async with following(c, server.url, key, last_id=cut.id) as s:
                again = await s.until({ids[-1]})
            heard = [i for e in again if e.name == "removed" for i in e.ids]
            assert heard == [r["atom_id"] for r in every if r["removed_at"] >= wipe_at]

    with serving_app(target.app()) as server:
        asyncio.run(main())
