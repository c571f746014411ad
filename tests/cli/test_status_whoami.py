"""`mnemo status` against an endpoint names the key's principal through `GET /mnemo/whoami` (a real `mnemo serve`),
and falls back to the key's fingerprint where the route is missing; the fingerprint still keys the watermarks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.backends.remote_calls import key_principal
from mnemo_tui.engine.sqlite.store import Store
from tests.support.serve import ServeProcess, start_serve
from tests.support.wire import serving_app, without_route


@pytest.fixture
def serve(isolated_home: Path, cli: Any) -> Iterator[tuple[ServeProcess, str, str]]:
    """A real `mnemo serve` over MNEMO_HOME's store, with a key of `alice`: (process, key id, key)."""
    created = cli("keys", "create", "alice")
    assert created.code == 0, created.stderr
    key = created.stdout.strip()
    key_id = json.loads(cli("keys", "list", "--format", "json").stdout)[0]["key_id"]
    served = start_serve(isolated_home)
    yield served, key_id, key
    served.stop()


def test_whoami_names_the_principal_and_key_id_of_the_key_sent(serve: tuple[ServeProcess, str, str]) -> None:
    served, key_id, key = serve
    answer = httpx.get(served.url + "/mnemo/whoami", headers={"X-Api-Key": key}, timeout=10)
    assert answer.status_code == 200 and answer.json() == {"principal": "alice", "key_id": key_id}
    refused = httpx.get(served.url + "/mnemo/whoami", headers={"X-Api-Key": "mk_live_" + "0" * 32}, timeout=10)
    assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHORIZED"
    listed = httpx.get(served.url.removesuffix("/api/v1") + "/openapi.json", timeout=10).json()
    assert "get" in listed["paths"]["/api/v1/mnemo/whoami"]


def test_status_shows_the_principal_the_server_knows(
    run_cli: Any, tmp_path: Path, serve: tuple[ServeProcess, str, str]
) -> None:
    served, key_id, key = serve
    env = {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key, "MNEMO_STATE": str(tmp_path / "s.db")}
    doc = json.loads(run_cli("status", "--format", "json", env=env).stdout)
    assert doc["principal"] == "alice"
    table = run_cli("status", env=env)
    assert table.code == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith("principal"))
    assert row.endswith(f"alice (key {key_id})")
    assert key not in table.stdout + table.stderr
    # A pass's watermark is kept (by the server, as the key's principal's consumer) and holds.
    assert run_cli("write", "one", env=env).code == 0
    assert run_cli("catchup", "--format", "json", env=env).code == 0
    marks = run_cli("watermark", "list", "--format", "json", env=env)
    assert marks.code == 0 and len(json.loads(marks.stdout)) == 1
    assert run_cli("catchup", "--format", "json", "--exit-code", env=env).code == 1  # nothing new: the mark held


def test_status_without_the_route_shows_the_key_fingerprint(run_cli: Any, tmp_path: Path) -> None:
    from mnemo_tui.server.app import create_app

    store = Store(tmp_path / "old.db")
    _key_id, key = store.create_key("alice")
    store.close()
    app = create_app(tmp_path / "old.db", workers=2)

    with serving_app(app, without_route(app, "/mnemo/whoami")) as server:
        env = {"MNEMO_ENDPOINT": server.base + "/api/v1", "MNEMO_API_KEY": key, "MNEMO_STATE": str(tmp_path / "s.db")}
        doc = json.loads(run_cli("status", "--format", "json", env=env).stdout)
        assert doc["principal"] == key_principal(key)
        table = run_cli("status", env=env).stdout
        assert "this key's fingerprint; the endpoint does not name it" in table
    # An endpoint that does not answer at all: the fingerprint too, as before the route existed.
    env["MNEMO_ENDPOINT"] = "http://127.0.0.1:9/api/v1"
    assert json.loads(run_cli("status", "--format", "json", env=env).stdout)["principal"] == key_principal(key)


def test_whoami_answers_on_each_engine(targets: Any) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    target = targets("whoami")
    store = target.open()
    key_id, key = store.create_key("alice")
    _other_id, other = store.create_key("alice")  # a second key of the same principal: told apart
    store.revoke_key(_other_id)
    with TestClient(target.app(workers=2)) as client:
        answer = client.get("/api/v1/mnemo/whoami", headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 200 and answer.json() == {"principal": "alice", "key_id": key_id}
        revoked = client.get("/api/v1/mnemo/whoami", headers={"X-Api-Key": other})
        assert revoked.status_code == 401 and revoked.json()["details"]["reason"] == "revoked_key"
        assert client.get("/api/v1/mnemo/whoami").status_code == 401
    store.close()


def test_remote_status_names_the_principal_the_server_knows(remote: Any) -> None:
    table = remote("status")
    assert table.code == 0 and "local (key key_" in table.stdout
    assert "by the server, as its consumers of this key's principal" in table.stdout
    data = json.loads(remote("status", "--format", "json").stdout)
    assert data["principal"] == "local"  # through GET /mnemo/whoami (tests/cli/test_status_whoami.py)
