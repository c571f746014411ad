"""The rest of the hosted memory plane on `mnemo serve` (docs/server.md): what each operation means here, and how
each answers bad input (the envelope and the documented status, never a 5xx)."""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mnemo_tui.engine.interface import Engine
from mnemo_tui.server import plane_routes
from tests.support.targets import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


class Wire:
    def __init__(self, client: TestClient, store: Engine) -> None:
        self.client = client
        self.store = store
        self.alice = store.create_key("alice")[1]
        self.bob = store.create_key("bob")[1]

    def call(self, method: str, path: str, body: Any = None, key: str | None = "alice", **kw: Any) -> Any:
        headers = dict(kw.pop("headers", {}))
        if key is not None:
            headers["X-Api-Key"] = self.alice if key == "alice" else self.bob if key == "bob" else key
        return self.client.request(method, "/api/v1" + path, json=body, headers=headers, **kw)

    def ok(self, method: str, path: str, body: Any = None, key: str | None = "alice", **kw: Any) -> Any:
        response = self.call(method, path, body, key, **kw)
        assert response.status_code == 200, response.text
        return response.json()

    def write(self, content: str, **fields: Any) -> str:
        return str(self.ok("POST", "/memory/write", {"content": content, **fields})["atom_id"])


def _wire(target: Target, **app: Any) -> Iterator[Wire]:
    store = target.open()
    with TestClient(target.app(workers=2, **app), raise_server_exceptions=False) as client:
        yield Wire(client, store)
    store.close()


@pytest.fixture
def wire(targets: Callable[[str], Target]) -> Iterator[Wire]:
    """The served app over a fresh store of each engine (parametrized)."""
    yield from _wire(targets("served"))


def refused(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and isinstance(body["message"], str) and body["message"]
    return dict(body)


def test_stats_count_the_callers_own_store_and_a_bad_key_is_401(wire: Wire) -> None:
    refused(wire.call("GET", "/memory/stats", key="mk_live_nope"), 401, "UNAUTHORIZED")
    refused(wire.call("GET", "/memory/stats", key=None), 401, "UNAUTHORIZED")
    empty = wire.ok("GET", "/memory/stats")
    assert empty["total_atoms"] == 0 and empty["domains"] == [] and empty["avg_valence"] == 0.0
    a = wire.write("one", concepts=["x", "y", "z"], domain="d1")
    wire.write("two", concepts=["x", "y"], domain="d2", fingerprint="fp")
    wire.ok("POST", "/memory/write", {"content": "bob's"}, key="bob")
    wire.ok("POST", "/memory/feedback", {"atom_ids": [a, a.replace(a[0], "0")], "outcome": -0.5})
    stats = wire.ok("GET", "/memory/stats")
    assert stats["total_atoms"] == 2 and stats["episodes"] == 2 and stats["domains"] == ["d1", "d2"]
    assert stats["hebbian_edges"] == 3 and stats["episodic_fingerprints"] == 1  # x-y, x-z, y-z
    assert stats["avg_valence"] == -0.5 and stats["feedback_atoms"] == 1
    assert stats["prototypes"] == stats["singletons"] == 0 and stats["avg_importance"] == 0.0


def test_feedback_counts_only_own_atoms_and_bad_input_is_422(wire: Wire) -> None:
    mine = wire.write("mine")
    theirs = wire.ok("POST", "/memory/write", {"content": "theirs"}, key="bob")["atom_id"]
    answer = wire.ok("POST", "/memory/feedback", {"atom_ids": [mine, theirs], "outcome": 1})
    assert answer["updated_count"] == 1 and answer["avg_valence"] == 1.0
    for body in ({"atom_ids": [mine], "outcome": 2}, {"atom_ids": ["x"], "outcome": 0}, {"outcome": 1}, None):
        envelope = refused(wire.call("POST", "/memory/feedback", body), 422, "VALIDATION_ERROR")
        assert "detail" not in envelope and envelope["details"]["errors"]
    too_many = {"atom_ids": [mine] * 501, "outcome": 0}
    refused(wire.call("POST", "/memory/feedback", too_many), 422, "VALIDATION_ERROR")


def test_write_batch_answers_each_item_and_an_idempotency_key_writes_once(wire: Wire) -> None:
    first = wire.write("first", external_ref="ref-1")
    batch = {
        "items": [{"content": "a"}, {"content": "b", "external_ref": "ref-1"}, {"content": "c", "external_ref": "n"}]
    }
    answer = wire.ok("POST", "/memory/write-batch", batch, headers={"Idempotency-Key": "k-1"})
    assert answer["total_count"] == 3 and answer["stored_count"] == 3
    assert answer["results"][1]["atom_id"] == first and answer["results"][1]["reason"].startswith("duplicate")
    again = wire.call("POST", "/memory/write_batch", batch, headers={"Idempotency-Key": "k-1"})
    assert again.json() == answer
    assert wire.ok("GET", "/memory/stats")["total_atoms"] == 3  # first, a, c: the retry wrote nothing
    # Another principal's same key is another key.
    assert wire.ok("POST", "/memory/write-batch", batch, key="bob", headers={"Idempotency-Key": "k-1"})["results"]
    refused(
        wire.call("POST", "/memory/write-batch", batch, headers={"Idempotency-Key": "k" * 241}), 400, "VALIDATION_ERROR"
    )
    supersedes = {"items": [{"content": "a"}, {"content": "b", "supersedes": [first]}]}
    envelope = refused(wire.call("POST", "/memory/write-batch", supersedes), 422, "VALIDATION_ERROR")
    assert envelope["message"].startswith("items.1.supersedes: ")
    assert envelope["details"]["errors"][0]["loc"] == ["body", "items", 1, "supersedes"]
    for body in ({"items": []}, {"items": [{"content": "x"}] * 501}, {}, None, {"items": [{"content": ""}]}):
        refused(wire.call("POST", "/memory/write-batch", body), 422, "VALIDATION_ERROR")


def test_search_parameters_are_never_ignored(wire: Wire) -> None:
    wire.write("deploy notes alpha", metadata={"env": "prod", "tags": ["x", "y"]}, author={"agent": "bot-1"})
    wire.write("deploy notes beta", metadata={"env": "staging-eu"}, concepts=["infra"])
    wire.write("Deploy  notes   ALPHA")
    wire.write("unrelated", fingerprint="task-7")

    def contents(path: str, **body: Any) -> list[str]:
        answer = wire.ok("POST", path, {"query": "deploy notes", "min_relevance": 0, **body})
        return [i["content"] for i in answer["items"]]

    assert contents("/memory/query", metadata_filter=[{"key": "env", "value": "prod"}]) == ["deploy notes alpha"]
    contains = [{"key": "env", "op": "contains", "value": "staging"}]
    assert contents("/memory/query", metadata_filter=contains) == ["deploy notes beta"]
    within = [{"key": "env", "op": "in", "value": ["prod", "staging-eu"]}]
    assert sorted(contents("/memory/query", metadata_filter=within)) == ["deploy notes alpha", "deploy notes beta"]
    tagged = [{"key": "tags", "op": "contains", "value": "y"}]
    assert contents("/memory/query", metadata_filter=tagged) == ["deploy notes alpha"]
    assert contents("/memory/read", author_agent="bot-1") == ["deploy notes alpha"]
    assert contents("/memory/read", author_is_external=True) == []
    assert len(contents("/memory/read", author_principal="alice")) == 3
    assert contents("/memory/read", concepts=["infra"])[0] == "deploy notes beta"
    assert len(contents("/memory/read", diversity=0.5)) == 2  # the two alphas are one text
    assert contents("/memory/read", strategy="temporal")[0] == "Deploy  notes   ALPHA"
    hit = wire.ok("POST", "/memory/read", {"query": "deploy", "fingerprint": "task-7", "min_relevance": 0})
    assert hit["episodic_hit"] is True and hit["items"][0]["content"] == "unrelated"
    assert hit["items"][0]["source"] == "episodic"
    miss = wire.ok("POST", "/memory/read", {"query": "deploy", "fingerprint": "task-8"})
    assert miss["episodic_hit"] is False
    refused(wire.call("POST", "/memory/read", {"query": "x", "diversity": 2}), 422, "VALIDATION_ERROR")
    bad_filter = {"query": "x", "metadata_filter": [{"key": "1bad", "value": 1}]}
    refused(wire.call("POST", "/memory/query", bad_filter), 422, "VALIDATION_ERROR")


def test_graph_joins_concepts_carried_together_and_follows_hops(wire: Wire) -> None:
    wire.write("a", concepts=["cache", "latency"])
    wire.write("b", concepts=["cache", "latency"])
    wire.write("c", concepts=["latency", "budget"])
    old = wire.write("d", concepts=["cache", "stale"])
    wire.write("e", concepts=["cache"], supersedes=[old])  # a superseded revision drops out
    one = wire.ok("POST", "/memory/graph", {"seeds": ["cache"]})
    assert [(e["source"], e["target"], e["count"]) for e in one["edges"]] == [("cache", "latency", 2)]
    assert one["edges"][0]["weight"] == round(2 / 4, 6)  # 2 together over 4 carrying either (3 cache + 3 latency - 2)
    two = wire.ok("POST", "/memory/graph", {"seeds": ["cache"], "depth": 2})
    assert {(e["source"], e["target"]) for e in two["edges"]} == {("cache", "latency"), ("budget", "latency")}
    assert two["min_weight_applied"] == 0.05
    assert {n["concept"]: n["degree"] for n in two["nodes"]} == {"cache": 1, "latency": 2, "budget": 1}
    limited = wire.ok("POST", "/memory/graph", {"seeds": ["cache"], "depth": 2, "limit": 1})
    assert len(limited["edges"]) == 1 and limited["truncated"] is True
    assert wire.ok("POST", "/memory/graph", {"seeds": ["nothing"]})["edges"] == []
    assert wire.ok("POST", "/memory/graph", {"seeds": ["cache"]}, key="bob")["edges"] == []
    for body in ({"seeds": []}, {"seeds": ["x"], "depth": 4}, {"seeds": ["x"] * 21}, {}, {"seeds": ["x" * 201]}):
        refused(wire.call("POST", "/memory/graph", body), 422, "VALIDATION_ERROR")
    refused(wire.call("POST", "/memory/graph", {"seeds": ["x"], "domain": "xroom:nope"}), 403, "FORBIDDEN")


def test_a_chain_walks_both_ways_and_reports_what_is_gone(wire: Wire) -> None:
    a = wire.write("v1")
    b = wire.write("v2", supersedes=[a])
    c = wire.write("v3", supersedes=[b])
    for start in (a, b, c):
        chain = wire.ok("GET", f"/memory/atoms/{start}/chain")
        assert [r["content"] for r in chain["revisions"]] == ["v1", "v2", "v3"]
        assert [r["is_head"] for r in chain["revisions"]] == [False, False, True]
    wire.ok("DELETE", f"/memory/atoms/{a}")
    broken = wire.ok("GET", f"/memory/atoms/{c}/chain")
    assert broken["dangling"] == [a] and len(broken["revisions"]) == 2
    refused(wire.call("GET", f"/memory/atoms/{c}/chain", key="bob"), 404, "NOT_FOUND")
    refused(wire.call("GET", "/memory/atoms/not-a-uuid/chain"), 422, "VALIDATION_ERROR")


def test_by_external_ref_finds_only_ones_own(wire: Wire) -> None:
    atom = wire.write("with a ref", external_ref="ticket-9", metadata={"k": 1})
    found = wire.ok("POST", "/memory/atoms/by-external-ref", {"external_ref": "ticket-9"})
    assert found["id"] == atom and found["external_ref"] == "ticket-9" and found["metadata"] == {"k": 1}
    refused(
        wire.call("POST", "/memory/atoms/by-external-ref", {"external_ref": "ticket-9"}, key="bob"), 404, "NOT_FOUND"
    )
    for body in ({}, {"external_ref": ""}, {"external_ref": "x" * 256}, None):
        refused(wire.call("POST", "/memory/atoms/by-external-ref", body), 422, "VALIDATION_ERROR")


def test_invites_are_listed_to_the_owner_only_and_never_with_a_code(wire: Wire) -> None:
    room = wire.ok("POST", "/memory/rooms", {"name": "design"})
    invite = wire.ok("POST", f"/memory/rooms/{room['room_id']}/invites", {"scope": "read", "max_uses": 3})
    assert invite["code"] in invite["share_message"] and f"mnemo rooms join {invite['code']}" in invite["share_message"]
    assert "memory_join_room" in invite["share_message"]
    wire.ok("POST", "/memory/rooms/join", {"code": invite["code"]}, key="bob")
    listed = wire.call("GET", f"/memory/rooms/{room['room_id']}/invites")
    assert listed.status_code == 200 and invite["code"] not in listed.text
    (info,) = listed.json()
    assert info["invite_id"] == invite["invite_id"] and info["uses"] == 1 and info["max_uses"] == 3
    member = wire.call("GET", f"/memory/rooms/{room['room_id']}/invites", key="bob")
    refused(member, 403, "FORBIDDEN")
    refused(wire.call("GET", "/memory/rooms/nope/invites"), 403, "FORBIDDEN")


def test_export_is_the_own_store_as_json_lines_and_is_bounded(wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    wire.write("one", metadata={"k": "v"}, external_ref="r")
    wire.write("two")
    wire.ok("POST", "/vault/secrets", {"alias": "db", "context": "c", "sealed_secret_b64": "c2VjcmV0"})
    response = wire.call("GET", "/memory/export")
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [x["content"] for x in lines] == ["one", "two"]
    assert lines[0]["metadata"] == {"k": "v"} and lines[0]["external_ref"] == "r"
    assert "c2VjcmV0" not in response.text
    assert wire.call("GET", "/memory/export", key="bob").text == ""
    monkeypatch.setattr(plane_routes, "MAX_EXPORT", 10)
    refused(wire.call("GET", "/memory/export"), 400, "VALIDATION_ERROR")


def test_a_domain_wipe_goes_through_the_delete_path(wire: Wire) -> None:
    keep = wire.write("kept searchable words", domain="other")
    wire.write("doomed searchable words", domain="doomed")
    successor = wire.write("successor", domain="doomed", supersedes=[keep])
    wire.ok("POST", "/vault/secrets", {"alias": "db", "context": "c", "sealed_secret_b64": "c2VjcmV0"})
    answer = wire.ok("DELETE", "/memory/domain/doomed")
    assert answer["deleted"] == 2 and answer["skipped_secrets"] == 1
    assert answer["superseded_predecessors_left_hidden_count"] == 1
    hits = wire.ok("POST", "/memory/read", {"query": "searchable", "min_relevance": 0})["items"]
    assert [h["atom_id"] for h in hits] == [keep]  # the index forgot the wiped entry; keep is live again
    assert wire.ok("GET", "/vault/secrets")["secrets"][0]["alias"] == "db"
    refused(wire.call("GET", f"/memory/atoms/{successor}"), 404, "NOT_FOUND")
    assert wire.ok("DELETE", "/memory/domain/nothing")["deleted"] == 0
    refused(wire.call("DELETE", "/memory/domain/xroom:abc"), 400, "VALIDATION_ERROR")


def test_reset_is_403_unless_the_server_allows_it(wire: Wire, targets: Callable[[str], Target]) -> None:
    wire.write("x")
    refused(wire.call("DELETE", "/memory/reset"), 403, "RESET_NOT_ALLOWED")
    refused(wire.call("DELETE", "/memory/reset", key=None), 401, "UNAUTHORIZED")
    for allowed in _wire(targets("allowed"), allow_reset=True):
        allowed.write("one")
        allowed.ok("POST", "/memory/write", {"content": "bob keeps his"}, key="bob")
        assert allowed.ok("DELETE", "/memory/reset") == {"deleted": 1, "status": "cleared"}
        assert allowed.ok("GET", "/memory/stats")["total_atoms"] == 0
        assert allowed.ok("GET", "/memory/stats", key="bob")["total_atoms"] == 1


def test_consolidate_reports_that_nothing_is_merged(wire: Wire) -> None:
    wire.write("a", domain="d")
    wire.write("b", domain="d")
    answer = wire.ok("POST", "/memory/consolidate", {"domain": "d"})
    assert answer["atoms_before"] == answer["atoms_after"] == 2 and answer["compression_ratio"] == 1.0
    assert wire.ok("POST", "/memory/consolidate", {})["atoms_before"] == 2
    refused(wire.call("POST", "/memory/consolidate", None), 422, "VALIDATION_ERROR")  # a body is required
    refused(wire.call("POST", "/memory/consolidate", {"domain": 1}), 422, "VALIDATION_ERROR")
    refused(wire.call("POST", "/memory/consolidate", {"domain": "xroom:r"}), 400, "VALIDATION_ERROR")


# Every operation that takes a body (the room invites' path has a parameter).
POSTED = (
    "/memory/recent",
    "/memory/read",
    "/memory/read-batch",
    "/memory/query",
    "/memory/write",
    "/memory/rooms",
    "/memory/rooms/join",
    "/vault/secrets",
    "/memory/feedback",
    "/memory/write-batch",
    "/memory/write_batch",
    "/memory/graph",
    "/memory/consolidate",
    "/memory/atoms/by-external-ref",
)


def test_the_probes_need_no_key_and_everything_else_checks_it_before_routing(wire: Wire) -> None:
    assert wire.ok("GET", "/ready", key=None)["status"] == "ok"
    ready = wire.ok("GET", "/health/ready", key=None)
    assert ready["ready"] is True and ready["checks"]["database"] is True
    for method, path in (("GET", "/memory/nowhere"), ("POST", "/memory/stats"), ("GET", "/vault/nowhere/x")):
        refused(wire.call(method, path, key="mk_live_bad"), 401, "UNAUTHORIZED")
    wrong = wire.call("POST", "/memory/stats")
    refused(wrong, 405, "METHOD_NOT_ALLOWED")
    assert wrong.headers["allow"] == "GET, HEAD"
    refused(wire.call("GET", "/memory/nowhere"), 404, "NOT_FOUND")
    # A required body that is missing is a 422 (never an empty success).
    for path in (*POSTED, "/memory/rooms/r1/invites"):
        missing = wire.call("POST", path)
        refused(missing, 422, "VALIDATION_ERROR")
        assert missing.json()["details"]["errors"] == [{"type": "missing", "loc": ["body"], "msg": "Field required"}]
    # A literal path is never taken for an `{id}`: its `Allow` is its own methods.
    for path, allow in (("/memory/atoms/by-external-ref", "POST"), ("/memory/rooms/join", "POST")):
        for method in ("GET", "DELETE", "PUT"):
            wrong = wire.call(method, path)
            refused(wrong, 405, "METHOD_NOT_ALLOWED")
            assert wrong.headers["allow"] == allow
    assert wire.call("PUT", "/memory/atoms/" + str(uuid.uuid4())).headers["allow"] == "DELETE, GET, HEAD"


def test_a_room_takes_the_hosted_schemas_bounds_and_past_them_is_a_422(wire: Wire) -> None:
    room = wire.ok("POST", "/memory/rooms", {"name": "n" * 200, "description": "d" * 2000})
    assert room["name"] == "n" * 200
    for body, field in (({"name": "m" * 201}, "name"), ({"name": "m", "description": "d" * 2001}, "description")):
        answer = wire.call("POST", "/memory/rooms", body)
        refused(answer, 422, "VALIDATION_ERROR")
        assert [e["loc"] for e in answer.json()["details"]["errors"]] == [["body", field]]
