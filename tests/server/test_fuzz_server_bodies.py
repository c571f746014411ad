"""Fuzz every request body of `mnemo serve` over loopback: never a 500 or a traceback, always an envelope; docs/server.md's limits hold."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.reliability import Server, start_server
from tests.support.targets import Target

httpx = pytest.importorskip("httpx")

pytestmark = [
    pytest.mark.slow,  # a real `mnemo serve` subprocess
]

ENVELOPE = {"code", "message", "requestId", "retryable", "details"}
ROOM_ID = "room_01HZZZZZZZZZZZZZZZZZZZZZZZ"
POSTS = [
    "/memory/recent",
    "/memory/read",
    "/memory/read-batch",
    "/memory/query",
    "/memory/write",
    "/memory/rooms",
    "/memory/rooms/join",
    "/memory/rooms/{room}/invites",
    "/vault/secrets",
    "/memory/write-batch",
    "/memory/write_batch",
    "/memory/feedback",
    "/memory/graph",
    "/memory/consolidate",
    "/memory/atoms/by-external-ref",
]
FIELDS = [
    "domain", "since", "until", "exclude_author", "limit", "cursor", "include_history", "query", "order_by",
    "top_k", "min_relevance", "content", "concepts", "metadata", "external_ref", "supersedes", "author",
    "queries", "domains", "name", "description", "scope", "expires_in_days", "max_uses", "code", "alias",
    "context", "sealed_secret_b64", "fingerprint", "items", "atom_ids", "outcome", "seeds", "depth",
    "min_weight", "metadata_filter", "diversity", "strategy", "author_agent", "author_is_external",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "", " ", "\x00", "xroom:", f"xroom:{ROOM_ID}", "xroom:room_x", "2026-11-30T07:00:00Z", "2026-13-40",
            "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59.999999-23:59", "now", "00000000-0000-4000-8000-000000000000", "mk_live_0",
            "relevance", "recency", "read", "read_write", "mnvr_" + "A" * 30, "*", "\"", "' OR 1=1 --", "NEAR(",
            "a" * 513, "é" * 5001,
        ]
    ),
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
shaped_bodies = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6)
any_bodies = st.one_of(
    shaped_bodies.map(lambda b: json.dumps(b).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"[]", b"null", b"NaN", b'{"limit": 1e999}', b"\xff\xfe{}", b'{"a":' * 500]),
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_target: Target) -> Iterator[Server]:
    """A real `mnemo serve` over each engine (parametrized)."""
    root = tmp_path_factory.mktemp("fuzz-server")
    home = root / "home"
    home.mkdir()
    running = start_server(module_target, home, ("alice", "bob"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[Any]:
    with httpx.Client(base_url=server.base, headers={"X-Api-Key": server.keys["alice"]}, timeout=30) as c:
        room = c.post("/memory/rooms", json={"name": "fuzz"}).json()["room_id"]
        for i in range(5):
            c.post("/memory/write", json={"content": f"seed {i}", "domain": "seed"})
        c.headers["X-Room"] = room  # remembered for the tests below (not read by the server)
        yield c


def assert_envelope(resp: Any, rid: str | None = None) -> None:
    """Any answer is JSON; any failure is the flat envelope (4xx, never 5xx, never a traceback)."""
    assert resp.status_code < 500, (resp.status_code, resp.text[:500])
    assert resp.headers["content-type"].startswith("application/json")
    assert "Traceback" not in resp.text
    body = resp.json()
    if resp.status_code != 200:
        assert isinstance(body, dict) and set(body) >= ENVELOPE, body
        assert isinstance(body["message"], str) and body["message"]
        assert isinstance(body["code"], str) and body["retryable"] is False
        if rid is not None:
            assert body["requestId"] == rid


def _no_tracebacks(server: Server) -> None:
    log = server.log_text()
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


@pytest.mark.parametrize("path", POSTS)
@settings(max_examples=40)
@given(body=any_bodies, rid=st.from_regex(r"\A[A-Za-z0-9-]{1,40}\Z"))
def test_any_body_on_any_post_endpoint_gets_an_envelope_never_a_500(
    server: Server, client: Any, path: str, body: bytes, rid: str
) -> None:
    url = path.format(room=client.headers["X-Room"])
    resp = client.post(url, content=body, headers={"Content-Type": "application/json", "X-Request-Id": rid})
    assert_envelope(resp, rid)
    _no_tracebacks(server)


@settings(max_examples=40)
@given(segment=st.text(min_size=1, max_size=60), method=st.sampled_from(["GET", "DELETE"]))
def test_any_path_parameter_gets_an_envelope(server: Server, client: Any, segment: str, method: str) -> None:
    resp = client.request(method, "/memory/atoms/" + quote(segment, safe=""))
    assert_envelope(resp)
    resp = client.post("/memory/rooms/" + quote(segment, safe="") + "/invites", json={})
    assert_envelope(resp)
    _no_tracebacks(server)


@settings(max_examples=25)
@given(
    cursor=st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=", min_size=1, max_size=512
    )
)
def test_a_fuzzed_cursor_is_a_400_never_a_first_page(server: Server, client: Any, cursor: str) -> None:
    resp = client.post("/memory/recent", json={"cursor": cursor, "limit": 2})
    assert resp.status_code == 400 and resp.json()["code"] == "VALIDATION_ERROR", resp.text


def test_wrong_methods_content_types_and_unknown_routes_get_envelopes(server: Server, client: Any) -> None:
    for method, path in [("GET", "/memory/recent"), ("PUT", "/memory/write"), ("PATCH", "/vault/secrets")]:
        assert_envelope(client.request(method, path))
    assert_envelope(client.get("/nope"))
    assert_envelope(client.post("/memory/recent", content=b"limit=5", headers={"Content-Type": "text/plain"}))
    assert_envelope(client.post("/memory/recent", content=b"{}", headers={"Content-Type": "multipart/form-data"}))
    _no_tracebacks(server)


def _status(client: Any, path: str, body: dict[str, Any]) -> int:
    resp = client.post(path, json=body)
    assert_envelope(resp)
    return int(resp.status_code)


def test_every_size_limit_of_wire_md_holds_at_and_past_the_bound(server: Server, client: Any) -> None:
    """The bound itself is accepted; one past it is refused (400 or the schema's 422), never stored."""
    room = client.headers["X-Room"]
    ids = [client.post("/memory/write", json={"content": f"old {i}"}).json()["atom_id"] for i in range(33)]
    cases: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("/memory/write", {"content": "x"}, {"content": ""}),
        ("/memory/write", {"content": "x" * 10_000}, {"content": "x" * 10_001}),
        ("/memory/write", {"content": "d", "domain": "d" * 100}, {"content": "d", "domain": "d" * 101}),
        ("/memory/write", {"content": "c", "concepts": ["c"] * 256}, {"content": "c", "concepts": ["c"] * 257}),
        (
            "/memory/write",
            {"content": "m", "metadata": {"k": "v" * (65_536 - 10)}},
            {"content": "m", "metadata": {"k": "v" * 65_536}},
        ),
        ("/memory/write", {"content": "r", "external_ref": "r" * 255}, {"content": "r", "external_ref": "r" * 256}),
        ("/memory/write", {"content": "s", "supersedes": ids[:32]}, {"content": "s", "supersedes": ids[:33]}),
        ("/memory/read", {"query": "q" * 5000}, {"query": "q" * 5001}),
        ("/memory/read", {"query": "q", "top_k": 500}, {"query": "q", "top_k": 501}),
        ("/memory/read", {"query": "q", "top_k": 1}, {"query": "q", "top_k": 0}),
        ("/memory/read", {"query": "q"}, {"query": ""}),
        ("/memory/recent", {"limit": 100}, {"limit": 101}),
        ("/memory/recent", {"limit": 1}, {"limit": 0}),
        ("/memory/read-batch", {"queries": [{"query": "q"}] * 50}, {"queries": [{"query": "q"}] * 51}),
        ("/memory/read-batch", {"queries": [{"query": "q"}]}, {"queries": []}),
        (f"/memory/rooms/{room}/invites", {"expires_in_days": 90}, {"expires_in_days": 91}),
        (f"/memory/rooms/{room}/invites", {"max_uses": 1000}, {"max_uses": 1001}),
        (f"/memory/rooms/{room}/invites", {"max_uses": 1}, {"max_uses": 0}),
        (
            "/vault/secrets",
            {"alias": "ok.name-1_2", "context": "c", "sealed_secret_b64": "c2VjcmV0"},
            {"alias": "bad/alias", "context": "c", "sealed_secret_b64": "c2VjcmV0"},
        ),
    ]
    for path, at_bound, past_bound in cases:
        assert _status(client, path, at_bound) == 200, (path, list(at_bound))
        assert _status(client, path, past_bound) in (400, 422), (path, list(past_bound))
    # A cursor longer than 512 characters is refused by shape before anything else.
    assert _status(client, "/memory/recent", {"cursor": "A" * 513}) in (400, 422)
    # Nothing past a bound was stored: 10,001 characters never made it in.
    walked = client.post("/memory/recent", json={"limit": 100, "domain": "general"}).json()["items"]
    assert all(len(i["content"]) <= 10_000 for i in walked)
    _no_tracebacks(server)


def test_a_body_over_1_mib_is_413_whether_declared_or_streamed(server: Server, client: Any) -> None:
    big = b'{"content": "' + b"x" * (1 << 20) + b'"}'
    resp = client.post("/memory/write", content=big, headers={"Content-Type": "application/json"})
    assert resp.status_code == 413 and resp.json()["code"] == "PAYLOAD_TOO_LARGE"

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused while it streams in
        yield b'{"content": "'
        for _ in range(40):
            yield b"y" * 65_536
        yield b'"}'

    resp = client.post("/memory/write", content=chunks(), headers={"Content-Type": "application/json"})
    assert resp.status_code == 413 and resp.json()["code"] == "PAYLOAD_TOO_LARGE"
    # Exactly at the limit the body is read (and then judged on its fields, here a 10,001-char content: 4xx).
    at_limit = b'{"content": "' + b"z" * ((1 << 20) - 15) + b'"}'
    assert len(at_limit) == 1 << 20
    assert client.post("/memory/write", content=at_limit, headers={"Content-Type": "application/json"}).status_code in (
        400,
        422,
    )
    assert client.get("/health").status_code == 200
    _no_tracebacks(server)


def test_the_principal_comes_from_the_key_never_from_the_body(server: Server, client: Any) -> None:
    resp = client.post(
        "/memory/write",
        json={"content": "who wrote me?", "author": {"principal": "mallory", "agent": "a"}, "principal": "mallory"},
    )
    if resp.status_code == 200:
        atom = resp.json()["atom_id"]
        item = client.get(f"/memory/atoms/{atom}").json()
        assert item["provenance"]["principal"] == "alice"
    else:  # refusing the smuggled field outright is as good
        assert resp.status_code in (400, 422)
    sealed = base64.b64encode(b"v").decode()
    assert_envelope(client.post("/vault/secrets", json={"alias": "a", "context": "c", "sealed_secret_b64": sealed}))
