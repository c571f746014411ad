"""The dialect as its clients send it (issue 56): integer-valued numbers and empty optional strings over HTTP,
a blank push-follow body refused like every other body, and removals asked from before 1970."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from mnemo_tui.engine.tombstones import TombstoneOps
from tests.support.targets import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


class Wire:
    def __init__(self, client: TestClient, key: str) -> None:
        self.client = client
        self.key = key

    def post(self, path: str, body: Any = None, content: bytes | None = None) -> Any:
        headers = {"X-Api-Key": self.key}
        if content is not None:
            return self.client.post("/api/v1" + path, content=content, headers=headers)
        return self.client.post("/api/v1" + path, json=body, headers=headers)


@pytest.fixture
def wire(target: Target) -> Iterator[Wire]:
    store = target.open()
    key = store.create_key("alice")[1]
    with TestClient(target.app(workers=2), raise_server_exceptions=False) as client:
        yield Wire(client, key)
    store.close()


def test_integer_valued_numbers_and_empty_optional_strings_are_answered(wire: Wire) -> None:
    first = wire.post("/memory/write", {"content": "deploys on Fly", "concepts": ["deploy", "fly"], "fingerprint": ""})
    assert first.status_code == 200, first.text
    again = wire.post("/memory/write", {"content": "deploys again", "concepts": ["deploy"], "external_ref": ""})
    third = wire.post("/memory/write", {"content": "no ref either", "external_ref": ""})
    # "" is no external ref: each write is its own entry, never "the first atom" of an empty ref
    assert len({first.json()["atom_id"], again.json()["atom_id"], third.json()["atom_id"]}) == 3
    assert wire.post("/memory/recent", {"limit": 2.0}).json()["next_cursor"] is not None
    assert len(wire.post("/memory/recent", {"limit": 1e1}).json()["items"]) == 3
    hits = wire.post("/memory/read", {"query": "deploys", "top_k": 1.0, "min_relevance": 0, "fingerprint": ""})
    assert hits.status_code == 200 and len(hits.json()["items"]) == 1 and hits.json()["episodic_hit"] is False
    assert wire.post("/memory/query", {"query": "deploys", "top_k": 5e0}).status_code == 200
    graph = wire.post("/memory/graph", {"seeds": ["deploy"], "depth": 2.0, "limit": 1e2})
    assert graph.status_code == 200 and graph.json()["min_weight_applied"] == 0.05
    room = wire.post("/memory/rooms", {"name": "design"}).json()
    invite = wire.post(f"/memory/rooms/{room['room_id']}/invites", {"max_uses": 3.0, "expires_in_days": 3e1})
    assert invite.status_code == 200 and invite.json()["code"], invite.text
    for path, body in [
        ("/memory/recent", {"limit": 2.5}),
        ("/memory/read", {"query": "q", "top_k": 1.5}),
        ("/memory/graph", {"seeds": ["a"], "depth": 1.0000001}),
        ("/memory/recent", {"limit": "2"}),
    ]:
        refused = wire.post(path, body)
        assert refused.status_code == 422 and refused.json()["details"]["errors"][0]["type"] == "int_type", body


@pytest.mark.parametrize("raw", [b"", b"  \n\t"])
def test_a_blank_follow_body_is_missing_like_every_other(wire: Wire, raw: bytes) -> None:
    answer = wire.post("/memory/follow", content=raw)
    assert answer.status_code == 422 and answer.headers["content-type"].startswith("application/json")
    assert answer.json()["details"]["errors"] == [{"type": "missing", "loc": ["body"], "msg": "Field required"}]


def test_removals_after_a_time_before_1970_are_gone_only_where_something_was_dropped(
    wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = {"after": "1969-07-20T20:17:00Z"}
    fresh = wire.post("/memory/removals", old)
    assert fresh.status_code == 200 and fresh.json() == {"removed": [], "next": None}
    one = wire.post("/memory/write", {"content": "one"}).json()["atom_id"]
    assert wire.client.delete(f"/api/v1/memory/atoms/{one}", headers={"X-Api-Key": wire.key}).json()["deleted"] == 1
    kept = wire.post("/memory/removals", old).json()["removed"]
    assert [r["atom_id"] for r in kept] == [one]
    monkeypatch.setattr(TombstoneOps, "tombstone_retention", 0)  # the next delete drops every tombstone
    two = wire.post("/memory/write", {"content": "two"}).json()["atom_id"]
    wire.client.delete(f"/api/v1/memory/atoms/{two}", headers={"X-Api-Key": wire.key})
    gone = wire.post("/memory/removals", old)
    assert gone.status_code == 410 and gone.json()["code"] == "REMOVALS_GONE"
