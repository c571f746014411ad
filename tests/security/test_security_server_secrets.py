"""Over `mnemo serve`: no response ever holds a vault value, no key reaches the access log, `--debug` never prints a key."""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_tui.state import sealing
from tests.support.keyrings import subprocess_env
from tests.support.reliability import Server, make_key, run_cli, start_server

httpx = pytest.importorskip("httpx")

pytestmark = [
    pytest.mark.slow,  # a real `mnemo serve` subprocess
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("secrets-server")
    home = root / "home"
    home.mkdir()
    running = start_server(root / "store.db", home, ("alice", "bob"))
    yield running
    running.stop()


def _revoked_key(server: Server) -> str:
    """A key of alice's that has been revoked (the engine calls behind `mnemo keys create` and `revoke`)."""
    from mnemo_tui.engine.sqlite.store import Store

    key = make_key(server.store, "alice")
    store = Store(server.store)
    try:
        store.revoke_key(store.list_keys()[-1].key_id)
    finally:
        store.close()
    return key


def _every_read(c: Any, room: str, atom: str, alias: str) -> list[Any]:
    """Every endpoint that answers with data, asked everything that might reach a secret."""
    return [
        c.post("/memory/recent", json={"limit": 100}),
        c.post("/memory/recent", json={"limit": 100, "include_history": True, "domain": "secrets"}),
        c.post("/memory/recent", json={"limit": 100, "domain": "xroom:" + room}),
        c.post("/memory/read", json={"query": alias, "top_k": 500, "min_relevance": 0}),
        c.post("/memory/read", json={"query": "secret vault value", "domain": "secrets", "min_relevance": 0}),
        c.post("/memory/read-batch", json={"queries": [{"query": alias, "min_relevance": 0}]}),
        c.post("/memory/query", json={"query": alias, "min_relevance": 0}),
        c.get("/memory/domains"),
        c.get("/memory/rooms"),
        c.get("/vault/secrets"),
        c.get(f"/memory/atoms/{atom}"),
        c.get(f"/memory/atoms/{atom}/chain"),
        c.get("/memory/export"),
        c.get("/memory/stats"),
        c.post("/memory/graph", json={"seeds": [alias], "depth": 3, "min_weight": 0}),
        c.post("/memory/atoms/by-external-ref", json={"external_ref": alias}),
        c.post("/memory/write-batch", json={"items": [{"content": f"{alias} batch", "concepts": [alias]}]}),
        c.post("/memory/feedback", json={"atom_ids": [atom], "outcome": 1}),
        c.post("/memory/consolidate", json={}),
        c.get(f"/memory/rooms/{room}/invites"),
        c.delete("/memory/domain/secrets"),
        c.post("/vault/secrets", json={"alias": alias, "context": "again", "sealed_secret_b64": "eA=="}),
    ]


@settings(max_examples=15)
@given(value=st.binary(min_size=12, max_size=200), alias=st.from_regex(r"\A[A-Za-z0-9._-]{1,30}\Z"))
def test_no_response_of_any_endpoint_holds_a_vault_value(server: Server, value: bytes, alias: str) -> None:
    alias = f"{alias}-{secrets.token_hex(3)}"
    # A random prefix makes the value impossible to meet by chance in an answer (`],"next_curs` was).
    value = secrets.token_hex(6).encode() + value
    sealed = sealing.seal(sealing.generate().public, value, alias)  # as `mnemo vault add` sends it
    with httpx.Client(base_url=server.base, headers={"X-Api-Key": server.keys["alice"]}, timeout=30) as c:
        room = c.post("/memory/rooms", json={"name": "r-" + alias}).json()["room_id"]
        atom = c.post("/memory/write", json={"content": f"{alias} rotated", "concepts": [alias]}).json()["atom_id"]
        stored = c.post(
            "/vault/secrets", json={"alias": alias, "context": f"what {alias} opens", "sealed_secret_b64": sealed}
        )
        assert stored.status_code == 200 and set(stored.json()) == {"atom_id", "alias"}
        answers = _every_read(c, room, atom, alias)
        # The secret's own atom id is not an entry either: nothing reads it back.
        answers.append(c.get(f"/memory/atoms/{stored.json()['atom_id']}"))
        assert answers[-1].status_code == 404
        # Only the use path hands the sealed value back, to its owner, and nothing else with it.
        use = c.get(f"/vault/secrets/by-alias/{alias}")
        assert use.status_code == 200 and use.json() == {"alias": alias, "sealed_secret_b64": sealed}
    with httpx.Client(base_url=server.base, headers={"X-Api-Key": server.keys["bob"]}, timeout=30) as c:
        answers += _every_read(c, room, atom, alias)
        answers.append(c.get(f"/vault/secrets/by-alias/{alias}"))  # bob's own (added above), never alice's
    plain = value.decode("latin-1")
    for resp in [*answers, use]:
        assert resp.status_code < 500
        assert base64.b64encode(value).decode() not in resp.text
        if value.isascii():
            assert plain not in resp.text
    for resp in answers:
        assert sealed not in resp.text, resp.request.url
    log = server.log_text()
    assert sealed not in log and base64.b64encode(value).decode() not in log
    assert not value.isascii() or plain not in log
    for path in server.store.parent.glob(server.store.name + "*"):
        assert value not in path.read_bytes()


def test_no_key_reaches_the_access_log_wherever_it_is_put(server: Server) -> None:
    good = server.keys["alice"]
    unknown = "mk_live_" + secrets.token_hex(16)
    revoked = _revoked_key(server)
    presented = [good, unknown, revoked, "mk_test_" + secrets.token_hex(16)]
    with httpx.Client(base_url=server.base, timeout=30) as c:
        for key in presented:
            c.post("/memory/recent", json={}, headers={"X-Api-Key": key})
            c.post("/memory/recent", json={}, headers={"Authorization": f"Bearer {key}"})
            c.get(f"/memory/atoms/{key}", headers={"X-Api-Key": good})  # a key pasted into a path
            c.get(f"/memory/domains?api_key={key}", headers={"X-Api-Key": good})  # or a query string
            c.get(f"/nope/{key}")
            c.post("/memory/write", json={"content": "x", "metadata": {"key": key}}, headers={"X-Api-Key": key})
    log = server.log_text()
    assert "/memory/recent" in log, "the access log is on: otherwise this proves nothing"
    for key in presented:
        assert key not in log
        assert key[8:] not in log  # not even the secret part under another prefix


def test_debug_output_never_prints_a_key(server: Server, tmp_path: Path) -> None:
    good = server.keys["alice"]
    revoked = _revoked_key(server)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    base_env.update({"MNEMO_HOME": str(home), "NO_COLOR": "1", "MNEMO_DEBUG": "1"})
    cases = [
        (server.base, good, ("recent", "--format", "json")),
        (server.base, good, ("recent", "--cursor", "forged", "--format", "json")),
        (server.base, good, ("recent", "--scope", "xroom:room_01HZZZZZZZZZZZZZZZZZZZZZZZ")),
        (server.base, good, ("catchup", "--format", "ndjson")),
        (server.base, good, ("status", "--format", "json")),
        (server.base, "mk_live_" + secrets.token_hex(16), ("recent",)),
        (server.base, "hunter2-not-a-key-at-all", ("recent",)),
        (server.base, revoked, ("--debug", "catchup")),
        ("http://127.0.0.1:9/api/v1", good, ("--debug", "recent")),  # nothing listens there
    ]
    for endpoint, key, argv in cases:
        env = dict(base_env, MNEMO_ENDPOINT=endpoint, MNEMO_API_KEY=key)
        proc = run_cli(env, *argv, timeout=120)
        assert key not in proc.stdout and key not in proc.stderr, (argv, proc.stderr[-2000:])
        if proc.returncode != 0:
            assert proc.returncode in (2, 3, 4, 5), (argv, proc.returncode, proc.stderr[-500:])
    assert good not in server.log_text()


def test_the_remote_cli_in_every_format_keeps_the_value_and_key_out(server: Server, tmp_path: Path) -> None:
    value = "remote-secret-" + secrets.token_hex(10)
    key = server.keys["bob"]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update({"MNEMO_HOME": str(home), "NO_COLOR": "1", "MNEMO_ENDPOINT": server.base, "MNEMO_API_KEY": key})
    env.update(subprocess_env(tmp_path / "keyring.json"))
    runs = [run_cli(env, "vault", "add", "bob-token", "--context", "ci token", input=value + "\n")]
    assert runs[0].returncode == 0, runs[0].stderr
    got = run_cli(env, "vault", "get", "bob-token")  # fetched sealed over the wire, unsealed here
    assert got.returncode == 0 and got.stdout == value + "\n", got.stderr
    for argv in (("vault", "get", "bob-token", "--insecure-storage"), ("vault", "get", "nope")):
        failed = run_cli(dict(env, MNEMO_DEBUG="1"), *argv)
        assert failed.returncode in (2, 3) and value not in failed.stdout + failed.stderr
    runs.append(run_cli(env, "write", "bob rotated bob-token"))
    for fmt in ("table", "json", "ndjson"):
        runs.append(run_cli(env, "recent", "--all", "--format", fmt))
        runs.append(run_cli(env, "catchup", "--consumer", fmt, "--format", fmt))
        runs.append(run_cli(env, "search", "bob-token", "--format", fmt))
    for fmt in ("table", "json"):
        runs += [run_cli(env, *argv, "--format", fmt) for argv in (("vault", "list"), ("rooms", "list"), ("status",))]
    assert "bob-token" in runs[-6].stdout + runs[-3].stdout  # the alias is listed
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        blob = proc.stdout + proc.stderr
        assert value not in blob and key not in blob
        assert base64.b64encode(value.encode()).decode() not in blob
    status = json.loads(runs[-1].stdout)
    assert status["key_source"] == "env" and key not in json.dumps(status)
    assert value not in server.log_text()
    for path in server.store.parent.glob(server.store.name + "*"):
        assert value.encode() not in path.read_bytes()
