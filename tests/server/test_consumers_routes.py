"""`/api/v1/mnemo/consumers` on both engines through the app `mnemo serve` runs: list, show, the commit's
compare-and-set (409 `CONSUMER_MOVED`), delete, lag, and a key that sees its own principal's consumers only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mnemo_tui.values.writes import WriteRequest
from tests.support.targets import Target
from tests.support.wire import served_store

T1 = "2026-12-01T10:00:00.000001Z"
T2 = "2026-12-01T11:00:00.000002Z"


@pytest.fixture
def api(target: Target) -> Iterator[tuple[httpx.Client, httpx.Client, Any]]:
    """Two clients (alice's key, bob's key) on a served target, and an engine over it."""
    engine = target.open()
    alice, bob = engine.create_key("alice")[1], engine.create_key("bob")[1]
    with (
        served_store(target) as server,
        httpx.Client(base_url=server.url, headers={"X-Api-Key": alice}, timeout=20) as a,
        httpx.Client(base_url=server.url, headers={"X-Api-Key": bob}, timeout=20) as b,
    ):
        yield a, b, engine
    engine.close()


def commit(client: httpx.Client, name: str, at: str, ids: list[str], expected: Any, **more: Any) -> httpx.Response:
    body = {"scope": more.pop("scope", None), "position": {"created_at": at, "boundary_ids": ids}, "expected": expected}
    return client.post(f"/mnemo/consumers/{name}", json=body | more)


def test_commit_is_a_compare_and_set_on_the_expected_position(api: Any) -> None:
    a, _b, _engine = api
    first = commit(a, "nightly", T1, ["x"], None, host="ci-1")
    assert first.status_code == 200, first.text
    assert first.json()["position"]["created_at"] == T1 and first.json()["position"]["host"] == "ci-1"
    # A second pass that also started from "no position" is refused, and told where the consumer is.
    late = commit(a, "nightly", T2, [], None)
    assert late.status_code == 409
    assert late.json()["code"] == "CONSUMER_MOVED" and late.json()["details"]["position"]["created_at"] == T1
    # From the stored position (ids in any order), it moves; from a stale one, it does not.
    moved = commit(a, "nightly", T2, ["y"], {"created_at": T1, "boundary_ids": ["x"]})
    assert moved.status_code == 200 and moved.json()["position"]["boundary_ids"] == ["y"]
    stale = commit(a, "nightly", T2, ["z"], {"created_at": T1, "boundary_ids": ["x"]})
    assert stale.status_code == 409
    forced = commit(a, "nightly", T1, [], {"created_at": "2020-01-01T00:00:00Z"}, unconditional=True)
    assert forced.status_code == 200 and forced.json()["position"]["created_at"] == T1
    shown = a.get("/mnemo/consumers/nightly").json()
    assert [p["created_at"] for p in shown["positions"]] == [T1] and shown["positions"][0]["scope"] is None


def test_scopes_are_kept_apart_and_deleted_one_or_all(api: Any) -> None:
    a, _b, _engine = api
    assert commit(a, "bot", T1, [], None).status_code == 200
    assert commit(a, "bot", T2, [], None, scope="notes").status_code == 200
    assert [p["scope"] for p in a.get("/mnemo/consumers/bot").json()["positions"]] == [None, "notes"]
    forget = {"scope": "notes", "position": None, "unconditional": True}
    assert a.post("/mnemo/consumers/bot", json=forget).json() == {"position": None}
    assert [p["scope"] for p in a.get("/mnemo/consumers/bot").json()["positions"]] == [None]
    assert a.post("/mnemo/consumers/bot", json=forget | {"unconditional": False}).status_code == 400
    assert commit(a, "bot", T2, [], None, scope="notes").status_code == 200
    assert a.delete("/mnemo/consumers/bot").json() == {"deleted": 2}  # every scope
    assert a.delete("/mnemo/consumers/bot").json() == {"deleted": 0}
    gone = a.get("/mnemo/consumers/bot")
    assert gone.status_code == 404 and gone.json()["details"] == {"reason": "unknown_consumer"}


def test_a_key_sees_its_own_principals_consumers_only(api: Any) -> None:
    a, b, _engine = api
    assert commit(a, "shared-name", T1, [], None).status_code == 200
    assert b.get("/mnemo/consumers").json() == {"consumers": []}
    assert b.get("/mnemo/consumers/shared-name").status_code == 404
    # Bob's first commit of the same name is his own (no position of his yet), and deletes touch his only.
    assert commit(b, "shared-name", T2, [], None).status_code == 200
    assert b.delete("/mnemo/consumers/shared-name").json() == {"deleted": 1}
    assert [p["created_at"] for p in a.get("/mnemo/consumers").json()["consumers"]] == [T1]


def test_list_shows_each_positions_lag(api: Any) -> None:
    a, _b, engine = api
    written = [engine.write("alice", WriteRequest(content=f"e{i}", domain="notes")) for i in range(3)]
    first = engine.get("alice", written[0].atom_id)
    from mnemo_tui import timefmt

    at = timefmt.to_iso(first.created_at)
    assert commit(a, "bot", at, [first.atom_id], None).status_code == 200
    [row] = a.get("/mnemo/consumers").json()["consumers"]
    newest = engine.get("alice", written[2].atom_id).created_at
    assert row["behind_entries"] == 2
    assert row["behind_seconds"] == pytest.approx((newest - first.created_at) / 1e6)
    caught = timefmt.to_iso(newest)
    assert commit(a, "bot", caught, [], {"created_at": at, "boundary_ids": [first.atom_id]}).status_code == 200
    [row] = a.get("/mnemo/consumers").json()["consumers"]
    assert (row["behind_entries"], row["behind_seconds"]) == (0, 0.0)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("%20", {"position": {}}),  # a blank name
        ("x" * 201, {"position": {}}),
        ("ok", {"position": {"created_at": "not a time"}}),
        ("ok", {"position": {}, "scope": "xroom:"}),
        ("ok", {}),
    ],
)
def test_bad_commits_are_refused_with_a_4xx(api: Any, name: str, body: dict[str, Any]) -> None:
    a, _b, _engine = api
    answer = a.post(f"/mnemo/consumers/{name}", json=body)
    assert answer.status_code in (400, 422), answer.text
    assert answer.json()["code"] == "VALIDATION_ERROR"
