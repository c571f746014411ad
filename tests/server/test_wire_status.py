"""The wire of `mnemo serve`: status codes, the flat error envelope, and the authentication matrix (docs/server.md)."""

from __future__ import annotations

import socket
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's note about httpx2: the test client works as it is
    from starlette.testclient import TestClient

from mnemo_tui.engine.interface import Engine
from tests.support.targets import Target
from tests.support.wire import read_answer, served_store

ENVELOPE = {"code", "message", "requestId", "retryable", "details"}
ROOM = "room_01ARZ3NDEKTSV4RRFFQ69G5FAV"


class Wire:
    """A test client on the real app, plus the served store for issuing keys."""

    def __init__(self, client: TestClient, store: Engine) -> None:
        self.client = client
        self.store = store

    def key(self, principal: str) -> str:
        return self.store.create_key(principal)[1]

    def post(self, path: str, body: Any = None, key: str | None = None, **kw: Any) -> Any:
        headers = dict(kw.pop("headers", {}))
        if key is not None:
            headers["X-Api-Key"] = key
        return self.client.post("/api/v1" + path, json=body, headers=headers, **kw)

    def get(self, path: str, key: str | None = None, **kw: Any) -> Any:
        headers = dict(kw.pop("headers", {}))
        if key is not None:
            headers["X-Api-Key"] = key
        return self.client.get("/api/v1" + path, headers=headers, **kw)


@pytest.fixture
def wire(target: Target) -> Iterator[Wire]:
    """The served app over a fresh store of each engine (parametrized)."""
    store = target.open()
    with TestClient(target.app(workers=2), raise_server_exceptions=False) as client:
        yield Wire(client, store)
    store.close()


def assert_envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) >= ENVELOPE, body
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    return {name: value for name, value in body.items() if name != "requestId"}  # each request's own (issue 63)


def test_health_and_openapi_need_no_key(wire: Wire) -> None:
    health = wire.get("/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "database": True, "version": health.json()["version"]}
    doc = wire.client.get("/openapi.json").json()
    assert "/api/v1/memory/recent" in doc["paths"]
    assert "RecentItemSchema" in doc["components"]["schemas"]


def test_an_empty_feed_is_200_with_no_cursor_never_404(wire: Wire) -> None:
    response = wire.post("/memory/recent", {}, wire.key("alice"))
    assert response.status_code == 200
    assert response.json() == {"items": [], "next_cursor": None}


def test_write_then_read_keeps_the_stored_wire_item_exactly(wire: Wire) -> None:
    key = wire.key("alice")
    written = wire.post("/memory/write", {"content": "hello", "concepts": ["x"]}, key).json()
    assert written["stored"] is True and written["superseded"] == []
    stored = wire.store.get("alice", written["atom_id"]).wire
    raw = wire.post("/memory/recent", {"limit": 5}, key).content.decode()
    assert raw == '{"items":[' + stored + '],"next_cursor":null}'


def test_bearer_authorization_is_accepted(wire: Wire) -> None:
    key = wire.key("alice")
    response = wire.client.post("/api/v1/memory/recent", json={}, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200


# -- the authentication matrix ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing_key"),
        ({"X-Api-Key": ""}, "missing_key"),
        ({"X-Api-Key": "not-a-key"}, "malformed_key"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "malformed_key"),
        ({"Authorization": "Bearer"}, "malformed_key"),
        ({"X-Api-Key": "mk_live_" + "0" * 32}, "invalid_key"),
    ],
    ids=["none", "empty", "malformed", "basic-auth", "bearer-without-token", "unknown"],
)
def test_refused_keys_answer_401_with_their_reason(wire: Wire, headers: dict[str, str], reason: str) -> None:
    response = wire.client.post("/api/v1/memory/recent", json={}, headers=headers)
    body = assert_envelope(response, 401, "UNAUTHORIZED")
    assert body["details"] == {"reason": reason}


def test_a_revoked_key_is_refused(wire: Wire) -> None:
    key_id, key = wire.store.create_key("alice")
    assert wire.post("/memory/recent", {}, key).status_code == 200
    wire.store.revoke_key(key_id)
    body = assert_envelope(wire.post("/memory/recent", {}, key), 401, "UNAUTHORIZED")
    assert body["details"] == {"reason": "revoked_key"}


def test_auth_comes_before_the_body_is_judged(wire: Wire) -> None:
    response = wire.client.post(
        "/api/v1/memory/recent", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert_envelope(response, 401, "UNAUTHORIZED")


def make_room(wire: Wire) -> tuple[dict[str, str], str]:
    keys = {name: wire.key(name) for name in ("alice", "bob", "carol", "dave")}
    room = wire.post("/memory/rooms", {"name": "design"}, keys["alice"]).json()
    for who, scope in (("bob", "read_write"), ("carol", "read")):
        code = wire.post(f"/memory/rooms/{room['room_id']}/invites", {"scope": scope}, keys["alice"]).json()["code"]
        assert wire.post("/memory/rooms/join", {"code": code}, keys[who]).status_code == 200
    return keys, room["room_id"]


def test_a_non_member_and_an_unknown_room_get_the_same_403(wire: Wire) -> None:
    keys, room_id = make_room(wire)
    wire.post("/memory/write", {"content": "plans", "domain": f"xroom:{room_id}"}, keys["alice"])
    foreign = wire.post("/memory/recent", {"domain": f"xroom:{room_id}"}, keys["dave"])
    unknown = wire.post("/memory/recent", {"domain": f"xroom:{ROOM}"}, keys["dave"])
    a, b = assert_envelope(foreign, 403, "FORBIDDEN"), assert_envelope(unknown, 403, "FORBIDDEN")
    assert a == b
    for path, body in (
        ("/memory/read", {"query": "plans", "domain": f"xroom:{room_id}"}),
        ("/memory/write", {"content": "hi", "domain": f"xroom:{room_id}"}),
    ):
        assert_envelope(wire.post(path, body, keys["dave"]), 403, "FORBIDDEN")
    invite_foreign = wire.post(f"/memory/rooms/{room_id}/invites", {}, keys["dave"])
    invite_unknown = wire.post(f"/memory/rooms/{ROOM}/invites", {}, keys["dave"])
    assert assert_envelope(invite_foreign, 403, "FORBIDDEN") == assert_envelope(invite_unknown, 403, "FORBIDDEN")
    assert_envelope(wire.post("/memory/rooms/not-even-an-id/invites", {}, keys["dave"]), 403, "FORBIDDEN")


def test_a_read_only_member_reads_but_cannot_write(wire: Wire) -> None:
    keys, room_id = make_room(wire)
    address = f"xroom:{room_id}"
    assert wire.post("/memory/recent", {"domain": address}, keys["carol"]).status_code == 200
    assert_envelope(wire.post("/memory/write", {"content": "x", "domain": address}, keys["carol"]), 403, "FORBIDDEN")
    assert wire.post("/memory/write", {"content": "x", "domain": address}, keys["bob"]).status_code == 200


def test_only_the_owner_invites(wire: Wire) -> None:
    keys, room_id = make_room(wire)
    assert_envelope(wire.post(f"/memory/rooms/{room_id}/invites", {}, keys["bob"]), 403, "FORBIDDEN")


def test_the_principal_comes_from_the_key_never_the_body(wire: Wire) -> None:
    key = wire.key("alice")
    body = {"content": "x", "author": {"principal": "mallory", "agent": "bot-7"}}
    atom = wire.post("/memory/write", body, key).json()["atom_id"]
    item = wire.post("/memory/recent", {}, key).json()["items"][0]
    assert item["atom_id"] == atom
    assert item["provenance"]["principal"] == "alice" and item["provenance"]["agent"] == "bot-7"


# -- statuses of the other failures -------------------------------------------------------------


def test_unknown_routes_and_methods_get_the_envelope(wire: Wire) -> None:
    assert_envelope(wire.client.get("/nowhere"), 404, "NOT_FOUND")
    assert_envelope(wire.get("/memory/nowhere", wire.key("a")), 404, "NOT_FOUND")
    # The key is checked before routing: without one, an unknown path or a wrong method is 401.
    assert_envelope(wire.client.put("/api/v1/memory/recent"), 401, "UNAUTHORIZED")
    assert_envelope(wire.client.get("/api/v1/memory/nowhere"), 401, "UNAUTHORIZED")
    not_allowed = wire.client.put("/api/v1/memory/recent", headers={"X-Api-Key": wire.key("a")})
    assert_envelope(not_allowed, 405, "METHOD_NOT_ALLOWED")
    assert not_allowed.headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/memory/atoms/0/"), ("POST", "/memory/recent/"), ("GET", "/memory/rooms/"), ("GET", "/health/")],
)
def test_a_trailing_slash_is_an_unknown_route_never_a_redirect(wire: Wire, method: str, path: str) -> None:
    # Starlette redirects a path with a trailing slash to the one without by default: a bare 307,
    # no envelope, and a client that does not follow it sees neither. No redirect under /api/v1.
    key = wire.key("alice")
    response = wire.client.request(
        method, "/api/v1" + path, headers={"X-Api-Key": key}, content=b"{}", follow_redirects=False
    )
    assert response.status_code not in (301, 302, 307, 308) and "location" not in response.headers
    assert_envelope(response, 404, "NOT_FOUND")


@pytest.mark.parametrize(
    "raw", [b"{bad", b"\xff\xfe", b'{"content":"x","metadata":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"]
)
def test_malformed_or_absurdly_nested_json_is_a_400_envelope(wire: Wire, raw: bytes) -> None:
    response = wire.post("/memory/write", key=wire.key("a"), content=raw, headers={"Content-Type": "application/json"})
    assert_envelope(response, 400, "VALIDATION_ERROR")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/memory/recent", {"limit": 0}, "limit"),
        ("/memory/recent", {"limit": "ten"}, "limit"),
        ("/memory/recent", {"since": "yesterday-ish"}, "since"),
        ("/memory/recent", [], None),
        ("/memory/write", {}, "content"),
        ("/memory/write", {"content": "x", "unknown_field": 1}, "unknown_field"),
        ("/memory/read", {"query": ""}, "query"),
        ("/memory/read", {"query": "x", "top_k": 501}, "top_k"),
        ("/memory/rooms", {"name": "x", "owner_org_id": "o"}, "owner_org_id"),
    ],
)
def test_a_body_that_does_not_match_the_schema_is_a_422_flat_envelope(
    wire: Wire, path: str, body: Any, field: str | None
) -> None:
    response = wire.post(path, body, wire.key("a"))
    envelope = assert_envelope(response, 422, "VALIDATION_ERROR")
    assert "detail" not in envelope  # the hosted shape: the SDK prints a top-level detail as a raw repr
    detail = envelope["details"]["errors"]
    if field is not None:
        assert envelope["message"].startswith(f"{field}: ")
    assert isinstance(detail, list) and detail
    assert all({"loc", "msg", "type"} <= set(d) for d in detail)
    if field is not None:
        assert any(d["loc"][-1] == field for d in detail)


@pytest.mark.parametrize(
    "body",
    [
        {"cursor": "not-a-cursor"},
        {"cursor": "x" * 600},
        {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
        {"domain": "xroom:nope"},
    ],
)
def test_bad_values_are_400(wire: Wire, body: dict[str, Any]) -> None:
    response = wire.post("/memory/recent", body, wire.key("a"))
    assert response.status_code in (400, 422)
    assert response.json()["code"] == "VALIDATION_ERROR"


def test_read_batch_and_query_refuse_rooms(wire: Wire) -> None:
    key = wire.key("alice")
    batch = {"queries": [{"query": "x", "domain": f"xroom:{ROOM}"}]}
    assert_envelope(wire.post("/memory/read-batch", batch, key), 400, "VALIDATION_ERROR")
    assert_envelope(
        wire.post("/memory/query", {"query": "x", "domains": [f"xroom:{ROOM}"]}, key), 400, "VALIDATION_ERROR"
    )


def test_read_batch_and_query_search_own_domains(wire: Wire) -> None:
    key = wire.key("alice")
    wire.post("/memory/write", {"content": "deploy in ops", "domain": "ops"}, key)
    wire.post("/memory/write", {"content": "deploy in research", "domain": "research"}, key)
    batch = wire.post(
        "/memory/read-batch", {"queries": [{"query": "deploy"}, {"query": "deploy", "domain": "ops"}]}, key
    )
    assert [len(r["items"]) for r in batch.json()["results"]] == [2, 1]
    query = wire.post("/memory/query", {"query": "deploy", "domains": ["research"]}, key).json()
    assert [i["domain"] for i in query["items"]] == ["research"]


def test_unknown_atom_and_invite_code_are_404_and_a_taken_name_409(wire: Wire) -> None:
    key = wire.key("alice")
    assert_envelope(wire.get("/memory/atoms/00000000-0000-4000-8000-000000000000", key), 404, "NOT_FOUND")
    assert_envelope(wire.get("/memory/atoms/not-a-uuid", key), 422, "VALIDATION_ERROR")
    assert_envelope(wire.post("/memory/rooms/join", {"code": "mnvr_unknown"}, key), 404, "NOT_FOUND")
    assert wire.post("/memory/rooms", {"name": "ops"}, key).status_code == 200
    assert_envelope(wire.post("/memory/rooms", {"name": "ops"}, key), 409, "CONFLICT")


def test_over_one_mib_is_413_before_the_body_is_read(wire: Wire, target: Target) -> None:
    key = wire.key("alice")
    # Over a real socket, only the headers are sent (announcing one byte over 1 MiB): only an answer
    # given before the body is read can come back.
    with served_store(target) as server, socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(
            b"POST /api/v1/memory/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"X-Api-Key: {key}\r\nContent-Length: {(1 << 20) + 1}\r\n\r\n".encode()
        )
        status, body = read_answer(sock)
    assert status == 413 and body["code"] == "PAYLOAD_TOO_LARGE"

    def chunks() -> Iterator[bytes]:
        yield b'{"content": "'
        for _ in range(32):
            yield b"x" * 65536
        yield b'"}'

    streamed = wire.post("/memory/write", key=key, content=chunks(), headers={"Content-Type": "application/json"})
    assert_envelope(streamed, 413, "PAYLOAD_TOO_LARGE")
    assert wire.post("/memory/recent", {}, key).json()["items"] == []


def test_request_id_is_echoed_in_errors(wire: Wire) -> None:
    response = wire.client.post("/api/v1/memory/recent", json={}, headers={"X-Request-Id": "req-42"})
    assert_envelope(response, 401, "UNAUTHORIZED")
    assert response.json()["requestId"] == "req-42"
    assert response.headers["x-request-id"] == "req-42"
    silent = wire.client.post("/api/v1/memory/recent", json={})  # none sent: one made, in both places
    assert silent.json()["requestId"] == silent.headers["x-request-id"] != "req-42"


def test_a_vault_value_never_leaves_the_server(wire: Wire) -> None:
    key = wire.key("alice")
    sealed = "c2VjcmV0LXZhbHVlLWh1bnRlcjI="
    created = wire.post("/vault/secrets", {"alias": "db", "context": "staging db", "sealed_secret_b64": sealed}, key)
    assert created.json()["alias"] == "db"
    bodies = [
        wire.get("/vault/secrets", key).text,
        wire.post("/memory/recent", {"include_history": True}, key).text,
        wire.post("/memory/read", {"query": "staging db"}, key).text,
        wire.get(f"/memory/atoms/{created.json()['atom_id']}", key).text,
        wire.get("/memory/domains", key).text,
    ]
    assert all(sealed not in b and "hunter2" not in b for b in bodies)
    assert wire.get("/vault/secrets", key).json()["secrets"][0]["context"] == "staging db"


def test_delete_answers_how_many_went(wire: Wire) -> None:
    key = wire.key("alice")
    atom = wire.post("/memory/write", {"content": "x"}, key).json()["atom_id"]
    other = wire.key("bob")
    assert wire.client.delete(f"/api/v1/memory/atoms/{atom}", headers={"X-Api-Key": other}).json() == {"deleted": 0}
    assert wire.client.delete(f"/api/v1/memory/atoms/{atom}", headers={"X-Api-Key": key}).json() == {"deleted": 1}
    assert wire.client.delete(f"/api/v1/memory/atoms/{atom}", headers={"X-Api-Key": key}).json() == {"deleted": 0}
