"""The official Python SDK (`mnemoverse`, pinned in the dev extra) against a loopback `mnemo serve`: every public
method of its sync and async clients, the catch-up loop of docs/architecture.md through it, and its error types."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mnemoverse import (
    AsyncMnemoClient,
    MnemoAuthError,
    MnemoClient,
    MnemoError,
)

from mnemo_tui.values.model import RecentQuery
from tests.support.targets import Target
from tests.support.wire import served_store


@dataclass
class Served:
    origin: str
    store: Any
    alice: str
    bob: str

    def client(self, key: str | None = None) -> MnemoClient:
        # Retries off and a fresh client (and circuit breaker) per test: nothing depends on timing.
        return MnemoClient(api_key=key or self.alice, base_url=self.origin, max_retries=0)

    def async_client(self, key: str | None = None) -> AsyncMnemoClient:
        return AsyncMnemoClient(api_key=key or self.alice, base_url=self.origin, max_retries=0)


@pytest.fixture
def served(target: Target) -> Iterator[Served]:
    store = target.open()
    alice, bob = store.create_key("alice")[1], store.create_key("bob")[1]
    with served_store(target) as server:
        # The SDK takes the ORIGIN and adds /api/v1 itself.
        yield Served(f"http://127.0.0.1:{server.port}", store, alice, bob)
    store.close()


def test_every_method_of_the_sync_client(served: Served) -> None:
    with served.client() as c:
        assert c.health().status == "ok" and c.health().database is True
        first = c.write("caching reduces latency", concepts=["caching", "latency"], metadata={"team": "core"})
        assert first.stored and first.atom_id is not None
        again = c.write("caching reduces latency, again", concepts=["caching"], external_ref="ref-1")
        same = c.write("a retry of the same ref", external_ref="ref-1")
        assert same.atom_id == again.atom_id
        batch = c.write_batch(
            [
                {"content": "latency budgets per endpoint", "concepts": ["latency", "budgets"]},
                {"content": "the retry of ref-1", "external_ref": "ref-1"},
            ]
        )
        assert batch.total_count == 2 and batch.stored_count == 2
        assert batch.results[1].atom_id == again.atom_id  # external_ref idempotence inside a batch
        found = c.read("caching latency", min_relevance=0.0)
        assert found.items and {str(i.atom_id) for i in found.items} >= {str(first.atom_id)}
        assert all("caching" in i.content or "latency" in i.content for i in found.items)
        feed = c.recent(limit=2)
        assert len(feed.items) == 2 and feed.next_cursor is not None
        assert feed.items[0].content == "latency budgets per endpoint"
        graph = c.graph(["caching"])
        assert {(e.source, e.target) for e in graph.edges} == {("caching", "latency")}
        assert graph.edges[0].count == 1 and 0 < graph.edges[0].weight <= 1
        feedback = c.feedback([first.atom_id], 1.0)
        assert feedback.updated_count == 1 and feedback.avg_valence == 1.0
        stats = c.stats()
        assert stats.total_atoms == 3 and stats.episodes == 3 and stats.domains == ["general"]
        assert stats.avg_valence == 1.0 and stats.hebbian_edges == 2  # caching-latency, budgets-latency


def test_every_method_of_the_async_client(served: Served) -> None:
    async def run() -> None:
        async with served.async_client() as c:
            assert (await c.health()).status == "ok"
            w = await c.write("async note on queues", concepts=["queues", "backpressure"], fingerprint="task-9")
            batch = await c.write_batch([{"content": "queues need backpressure", "concepts": ["queues"]}])
            assert batch.stored_count == 1 and batch.results[0].stored
            hit = await c.read("anything at all", fingerprint="task-9", min_relevance=0.0)
            assert hit.episodic_hit is True and str(hit.items[0].atom_id) == str(w.atom_id)
            page = await c.recent(limit=10)
            assert [i.content for i in page.items] == ["queues need backpressure", "async note on queues"]
            graph = await c.graph(["queues"], depth=2)
            assert [(e.source, e.target) for e in graph.edges] == [("backpressure", "queues")]
            assert graph.min_weight_applied == 0.05
            fb = await c.feedback([w.atom_id], -0.5)
            assert fb.updated_count == 1 and fb.avg_valence == -0.5
            stats = await c.stats()
            assert stats.total_atoms == 2 and stats.episodic_fingerprints == 1 and stats.avg_valence == -0.5

    asyncio.run(run())


def test_feedback_moves_search_ranking(served: Served) -> None:
    with served.client() as c:
        a = c.write("deploy notes for staging")
        b = c.write("deploy notes for staging")
        c.feedback([a.atom_id], -1.0)
        c.feedback([b.atom_id], 1.0)
        ranked = c.read("deploy staging", min_relevance=0.0)
        assert [str(i.atom_id) for i in ranked.items] == [str(b.atom_id), str(a.atom_id)]
        assert ranked.items[0].valence == 1.0 and ranked.items[1].valence == -1.0


def test_the_catch_up_loop_of_the_product_document_through_the_sdk(served: Served) -> None:
    with served.client() as writer:
        for n in range(7):
            writer.write(f"entry {n}")
    with served.client(served.bob) as reader:
        assert reader.recent().items == []  # bob's own store is empty: an answer, not a 404
    with served.client() as c:
        watermark = None
        delivered: list[str] = []
        for _ in range(2):
            cursor, newest = None, watermark
            while True:
                page = c.recent(since=watermark, limit=3, cursor=cursor)
                for item in page.items:
                    if item.created_at.isoformat() == watermark and str(item.atom_id) in delivered:
                        continue
                    delivered.append(str(item.atom_id))
                    newest = max(newest or "", item.created_at.isoformat())
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            watermark = newest
            c.write("one more after the first pass")
        contents = [e.content for e in served.store.recent("alice", _q()).items]
        assert len(delivered) == len(set(delivered)) == 8 and len(contents) == 9


def _q() -> RecentQuery:
    return RecentQuery(limit=100)


def test_the_sdk_error_types(served: Served) -> None:
    bad = MnemoClient(api_key="mk_live_wrong_key", base_url=served.origin, max_retries=0)
    with bad, pytest.raises(MnemoAuthError):
        bad.stats()
    room = served.store.create_room("alice", "design")
    # The SDK documents 401 and 403 alike as MnemoAuthError.
    with served.client(served.bob) as bob, pytest.raises(MnemoAuthError, match="member"):
        bob.write("let me in", domain=room.address)
    with served.client() as c:
        with pytest.raises(MnemoError) as invalid:
            c.write_batch([{"content": "x", "supersedes": ["3f1e0c4a-2b1d-4f7e-9a55-0c1d2e3f4a5b"]}])
        assert invalid.value.status == 422
        # The flat envelope reads as one line: no raw Python list in the message.
        assert "items.0.supersedes" in invalid.value.message and "[{" not in invalid.value.message


def test_a_base_url_with_the_api_prefix_is_the_users_mistake_and_says_404(served: Served) -> None:
    wrong_base = MnemoClient(api_key=served.alice, base_url=served.origin + "/api/v1", max_retries=0)
    with wrong_base, pytest.raises(MnemoError) as wrong:
        wrong_base.stats()
    assert wrong.value.status == 404


def test_what_the_sdk_passes_through_as_its_callers_give_it(served: Served) -> None:
    # Integer-valued floats and an empty fingerprint, as a caller's arithmetic or defaults make them
    # (issue 56): JSON Schema counts 10.0 as an integer and the hosted models take "".
    with served.client() as c:
        written = c.write("caching reduces latency", concepts=["caching", "latency"], fingerprint="")
        assert written.stored and written.atom_id is not None
        c.write("latency budgets", concepts=["latency", "budgets"], external_ref="")
        assert [i.content for i in c.recent(limit=10.0).items] == ["latency budgets", "caching reduces latency"]  # type: ignore[arg-type]
        found = c.read("caching", top_k=5.0, min_relevance=0.0)  # type: ignore[arg-type]
        assert [str(i.atom_id) for i in found.items] == [str(written.atom_id)]
        graph = c.graph(["caching"], depth=2.0, limit=50.0)  # type: ignore[arg-type]
        assert {(e.source, e.target) for e in graph.edges} >= {("caching", "latency")}
        assert c.stats().episodic_fingerprints == 0  # "" is no fingerprint
        with pytest.raises(MnemoError) as fraction:
            c.recent(limit=10.5)  # type: ignore[arg-type]
        assert fraction.value.status == 422
