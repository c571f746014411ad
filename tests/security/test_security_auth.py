"""The auth matrix of `mnemo serve`: every endpoint against every kind of credential and every role, the right status each time."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.reliability import MNEMO, Server, make_key, start_server

httpx = pytest.importorskip("httpx")

pytestmark = [
    pytest.mark.slow,  # a real `mnemo serve` subprocess
]

UNKNOWN_ROOM = "room_01HZZZZZZZZZZZZZZZZZZZZZZZ"


class World:
    """A served store: alice owns a room where bob writes and carol only reads; dave belongs to nothing."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.clients = {
            p: httpx.Client(base_url=server.base, headers={"X-Api-Key": k}, timeout=30) for p, k in server.keys.items()
        }
        alice = self.clients["alice"]
        self.room = alice.post("/memory/rooms", json={"name": "team"}).json()["room_id"]
        self.address = "xroom:" + self.room
        for who, scope in (("bob", "read_write"), ("carol", "read")):
            code = alice.post(f"/memory/rooms/{self.room}/invites", json={"scope": scope}).json()["code"]
            assert self.clients[who].post("/memory/rooms/join", json={"code": code}).status_code == 200
        self.own_atom = alice.post("/memory/write", json={"content": "alice's own note"}).json()["atom_id"]
        self.room_atom = alice.post("/memory/write", json={"content": "team note", "domain": self.address}).json()[
            "atom_id"
        ]
        alice.post("/vault/secrets", json={"alias": "alice-db", "context": "db", "sealed_secret_b64": "c2VjcmV0"})
        revoked = make_key(server.store, "alice")
        self.revoked = revoked
        proc = subprocess.run(
            [MNEMO, "--store", str(server.store), "keys", "list", "--format", "json"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        newest = json.loads(proc.stdout)[-1]["key_id"]
        assert (
            subprocess.run(
                [MNEMO, "--store", str(server.store), "keys", "revoke", newest], capture_output=True, check=False
            ).returncode
            == 0
        )

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("auth")
    home = root / "home"
    home.mkdir()
    server = start_server(root / "store.db", home, ("alice", "bob", "carol", "dave"))
    w = World(server)
    yield w
    w.close()
    server.stop()


def endpoints(w: World) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every authenticated endpoint of docs/server.md with a body that is valid for alice."""
    return [
        ("POST", "/memory/recent", {}),
        ("POST", "/memory/read", {"query": "note"}),
        ("POST", "/memory/read-batch", {"queries": [{"query": "note"}]}),
        ("POST", "/memory/query", {"query": "note"}),
        ("POST", "/memory/write", {"content": "matrix"}),
        ("GET", "/memory/rooms", None),
        ("POST", "/memory/rooms", {"name": "room-" + secrets.token_hex(4)}),
        ("POST", "/memory/rooms/join", {"code": "mnvr_" + "x" * 30}),
        ("POST", f"/memory/rooms/{w.room}/invites", {}),
        ("GET", "/vault/secrets", None),
        ("POST", "/vault/secrets", {"alias": "a" + secrets.token_hex(4), "context": "c", "sealed_secret_b64": "eA=="}),
        ("GET", f"/memory/atoms/{w.own_atom}", None),
        ("DELETE", "/memory/atoms/00000000-0000-4000-8000-000000000000", None),
        ("GET", "/memory/domains", None),
    ]


def call(w: World, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]) -> Any:
    with httpx.Client(base_url=w.server.base, timeout=30) as c:
        return c.request(method, path, json=body, headers=headers)


def credentials(w: World) -> list[tuple[str, dict[str, str], int, str | None]]:
    """(name, headers, expected status for a valid request, expected `details.reason`)."""
    good = w.server.keys["alice"]
    unknown = "mk_live_" + secrets.token_hex(16)
    return [
        ("none", {}, 401, "missing_key"),
        ("empty", {"X-Api-Key": ""}, 401, "missing_key"),
        ("bearer without a key", {"Authorization": "Bearer"}, 401, None),
        ("basic scheme", {"Authorization": "Basic " + good}, 401, "malformed_key"),
        ("not a key", {"X-Api-Key": "hunter2"}, 401, "malformed_key"),
        ("key with junk", {"X-Api-Key": good + "!"}, 401, "malformed_key"),
        ("unknown key", {"X-Api-Key": unknown}, 401, "invalid_key"),
        ("unknown bearer", {"Authorization": f"Bearer {unknown}"}, 401, "invalid_key"),
        ("truncated key", {"X-Api-Key": good[:-1]}, 401, "invalid_key"),
        ("revoked key", {"X-Api-Key": w.revoked}, 401, "revoked_key"),
        (
            "revoked beside a good bearer",
            {"X-Api-Key": w.revoked, "Authorization": f"Bearer {good}"},
            401,
            "revoked_key",
        ),
        ("good key", {"X-Api-Key": good}, 200, None),
        ("good bearer", {"Authorization": f"Bearer {good}"}, 200, None),
        ("good bearer, lower-case scheme", {"Authorization": f"bearer {good}"}, 200, None),
    ]


def test_every_endpoint_answers_every_credential_with_the_right_status(world: World) -> None:
    checked = 0
    for name, headers, status, reason in credentials(world):
        for method, path, body in endpoints(world):
            resp = call(world, method, path, body, headers)
            want = status
            if status == 200 and path == "/memory/rooms/join":
                want = 404  # authenticated, but the code is unknown
            assert resp.status_code == want, (name, method, path, resp.status_code, resp.text[:300])
            if want == 401:
                body_json = resp.json()
                assert body_json["code"] == "UNAUTHORIZED" and body_json["retryable"] is False
                if reason is not None:
                    assert body_json["details"]["reason"] == reason, (name, path, body_json)
                presented = headers.get("X-Api-Key") or headers.get("Authorization", "").partition(" ")[2].strip()
                assert not presented or presented not in resp.text  # a refused key is never echoed
            checked += 1
    assert checked == len(credentials(world)) * len(endpoints(world))


def test_health_and_openapi_need_no_key_and_refuse_nothing(world: World) -> None:
    for headers in ({}, {"X-Api-Key": "hunter2"}, {"X-Api-Key": world.revoked}):
        with httpx.Client(timeout=30) as c:
            assert c.get(world.server.base + "/health", headers=headers).status_code == 200
            assert c.get(f"http://127.0.0.1:{world.server.port}/openapi.json", headers=headers).status_code == 200


ROLES = ("alice", "bob", "carol", "dave")


def _as(w: World, who: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return w.clients[who].request(method, path, json=body)


@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("recent room", {"alice": 200, "bob": 200, "carol": 200, "dave": 403}),
        ("recent unknown room", {"alice": 403, "bob": 403, "carol": 403, "dave": 403}),
        ("search room", {"alice": 200, "bob": 200, "carol": 200, "dave": 403}),
        ("write room", {"alice": 200, "bob": 200, "carol": 403, "dave": 403}),
        ("write unknown room", {"alice": 403, "bob": 403, "carol": 403, "dave": 403}),
        ("invite", {"alice": 200, "bob": 403, "carol": 403, "dave": 403}),
        ("invite unknown room", {"alice": 403, "bob": 403, "carol": 403, "dave": 403}),
        ("read-batch room", {"alice": 400, "bob": 400, "carol": 400, "dave": 400}),
        ("query room", {"alice": 400, "bob": 400, "carol": 400, "dave": 400}),
        ("supersede in room", {"alice": 400, "bob": 400, "carol": 400, "dave": 400}),
        ("get own atom", {"alice": 200, "bob": 404, "carol": 404, "dave": 404}),
        ("get room atom", {"alice": 200, "bob": 200, "carol": 200, "dave": 404}),
    ],
)
def test_each_role_gets_the_right_status(world: World, what: str, expected: dict[str, int]) -> None:
    w = world
    requests: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "recent room": ("POST", "/memory/recent", {"domain": w.address}),
        "recent unknown room": ("POST", "/memory/recent", {"domain": "xroom:" + UNKNOWN_ROOM}),
        "search room": ("POST", "/memory/read", {"query": "team", "domain": w.address}),
        "write room": ("POST", "/memory/write", {"content": "hello room", "domain": w.address}),
        "write unknown room": ("POST", "/memory/write", {"content": "x", "domain": "xroom:" + UNKNOWN_ROOM}),
        "invite": ("POST", f"/memory/rooms/{w.room}/invites", {"scope": "read"}),
        "invite unknown room": ("POST", f"/memory/rooms/{UNKNOWN_ROOM}/invites", {}),
        "read-batch room": ("POST", "/memory/read-batch", {"queries": [{"query": "team", "domain": w.address}]}),
        "query room": ("POST", "/memory/query", {"query": "team", "domains": [w.address]}),
        "supersede in room": (
            "POST",
            "/memory/write",
            {"content": "x", "domain": w.address, "supersedes": [w.room_atom]},
        ),
        "get own atom": ("GET", f"/memory/atoms/{w.own_atom}", None),
        "get room atom": ("GET", f"/memory/atoms/{w.room_atom}", None),
    }
    method, path, body = requests[what]
    codes = {200: None, 400: "VALIDATION_ERROR", 403: "FORBIDDEN", 404: "NOT_FOUND"}
    for who in ROLES:
        resp = _as(w, who, method, path, body)
        assert resp.status_code == expected[who], (what, who, resp.text[:300])
        if codes[expected[who]] is not None:
            assert resp.json()["code"] == codes[expected[who]]
    # An unknown room and a room one is not in read the same: nothing tells them apart.
    if what == "recent room":
        outsider = _as(w, "dave", "POST", "/memory/recent", {"domain": w.address}).json()
        unknown = _as(w, "dave", "POST", "/memory/recent", {"domain": "xroom:" + UNKNOWN_ROOM}).json()
        assert outsider["message"] == unknown["message"]


def test_nobody_reads_deletes_or_lists_what_is_anothers(world: World) -> None:
    w = world
    mine = w.clients["bob"].post("/memory/write", json={"content": "bob private", "domain": "bobs"}).json()["atom_id"]
    assert _as(w, "alice", "DELETE", f"/memory/atoms/{mine}").json() == {"deleted": 0}
    assert _as(w, "bob", "GET", f"/memory/atoms/{mine}").status_code == 200
    for who in ("alice", "carol", "dave"):
        feed = _as(w, who, "POST", "/memory/recent", {"limit": 100}).json()["items"]
        assert mine not in {i["atom_id"] for i in feed}
        assert "bobs" not in _as(w, who, "GET", "/memory/domains").json()["domains"]
        assert _as(w, who, "POST", "/memory/recent", {"domain": "bobs"}).json()["items"] == []
    assert [s["alias"] for s in _as(w, "bob", "GET", "/vault/secrets").json()["secrets"]] == []
    assert "alice-db" in [s["alias"] for s in _as(w, "alice", "GET", "/vault/secrets").json()["secrets"]]


def test_invites_and_room_names_conflict_as_documented(world: World) -> None:
    w = world
    code = _as(w, "alice", "POST", f"/memory/rooms/{w.room}/invites", {"max_uses": 1}).json()["code"]
    assert _as(w, "dave", "POST", "/memory/rooms/join", {"code": code}).status_code == 200
    assert _as(w, "dave", "POST", "/memory/rooms/join", {"code": code}).json()["already_member"] is True
    used_up = _as(w, "bob", "POST", "/memory/rooms/join", {"code": code})
    assert used_up.status_code in (200, 409)  # bob is a member already: a no-op success, or the code is used up
    fresh = "newroom-" + secrets.token_hex(3)
    assert _as(w, "alice", "POST", "/memory/rooms", {"name": fresh}).status_code == 200
    assert _as(w, "alice", "POST", "/memory/rooms", {"name": fresh}).status_code == 409
    assert _as(w, "bob", "POST", "/memory/rooms", {"name": fresh}).status_code == 200  # names are per owner


def test_a_key_revoked_while_the_server_runs_is_refused_on_the_next_request(world: World) -> None:
    key = make_key(world.server.store, "erin")
    with httpx.Client(base_url=world.server.base, headers={"X-Api-Key": key}, timeout=30) as c:
        assert c.post("/memory/recent", json={}).status_code == 200
        listed = subprocess.run(
            [MNEMO, "--store", str(world.server.store), "keys", "list", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        )
        erin = next(k["key_id"] for k in json.loads(listed.stdout) if k["principal"] == "erin")
        assert key not in listed.stdout
        subprocess.run([MNEMO, "--store", str(world.server.store), "keys", "revoke", erin], check=True)
        resp = c.post("/memory/recent", json={})  # same keep-alive connection: no cached grant
        assert resp.status_code == 401 and resp.json()["details"]["reason"] == "revoked_key"
