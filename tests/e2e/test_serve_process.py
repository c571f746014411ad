"""`mnemo serve` as a process (loopback, clean shutdown, an access log without keys) and `mnemo keys`."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.serve import ServeProcess, start_serve


@pytest.fixture
def serve(isolated_home: Path) -> Iterator[ServeProcess]:
    served = start_serve(isolated_home)
    yield served
    if served.proc.poll() is None:
        served.proc.kill()
        served.proc.wait(timeout=10)


def test_serve_binds_loopback_and_stops_cleanly_on_sigterm(serve: ServeProcess) -> None:
    assert serve.url.startswith("http://127.0.0.1:")
    code, log = serve.stop(signal.SIGTERM)
    assert code == 0
    assert "mnemo serve: stopped" in log and "Traceback" not in log


def test_serve_stops_cleanly_on_sigint(serve: ServeProcess) -> None:
    code, log = serve.stop(signal.SIGINT)
    assert code == 0
    assert "mnemo serve: stopped" in log and "Traceback" not in log


def test_the_access_log_never_contains_a_key(cli: Any, serve: ServeProcess) -> None:
    created = cli("keys", "create", "alice")
    assert created.code == 0
    key = created.stdout.strip()
    assert re.fullmatch(r"mk_live_[0-9a-f]{32}", key)
    with httpx.Client(base_url=serve.url) as client:
        assert client.post("/memory/write", json={"content": "x"}, headers={"X-Api-Key": key}).status_code == 200
        assert client.post("/memory/recent", json={}, headers={"Authorization": f"Bearer {key}"}).status_code == 200
        assert client.get(f"/memory/{key}", headers={"X-Api-Key": key}).status_code == 404
        assert client.post("/memory/recent", json={}, headers={"X-Api-Key": key + "0"}).status_code == 401
    code, log = serve.stop()
    assert code == 0
    assert "/api/v1/memory/write" in log and "principal=alice" in log
    assert key not in log and key[8:] not in log


def test_keys_create_list_revoke(cli: Any, serve: ServeProcess) -> None:
    key = cli("keys", "create", "bot-1").stdout.strip()
    listed = json.loads(cli("keys", "list", "--format", "json").stdout)
    assert [(k["principal"], k["revoked"]) for k in listed] == [("bot-1", False)]
    assert key not in json.dumps(listed) and key not in cli("keys", "list").stdout
    headers = {"X-Api-Key": key}
    assert httpx.post(serve.url + "/memory/recent", json={}, headers=headers).status_code == 200
    assert cli("keys", "revoke", listed[0]["key_id"]).code == 0
    refused = httpx.post(serve.url + "/memory/recent", json={}, headers=headers)
    assert refused.status_code == 401 and refused.json()["details"] == {"reason": "revoked_key"}
    assert json.loads(cli("keys", "list", "--format", "json").stdout)[0]["revoked"] is True
    missing = cli("keys", "revoke", "key_nope")
    assert missing.code == 2 and "Traceback" not in missing.stderr


def test_serve_refuses_an_endpoint_and_a_busy_port(cli: Any, serve: ServeProcess) -> None:
    refused = cli("serve", env={"MNEMO_ENDPOINT": serve.url})
    assert refused.code == 2 and "embedded store only" in refused.stderr
    port = serve.url.split(":")[2].split("/")[0]
    busy = cli("serve", "--port", port)
    assert busy.code == 2 and "cannot listen" in busy.stderr and "Traceback" not in busy.stderr


def test_reset_is_refused_unless_serve_was_started_to_allow_it(isolated_home: Path, cli: Any) -> None:
    key = cli("keys", "create", "alice").stdout.strip()
    cli("write", "one", env={"MNEMO_PRINCIPAL": "alice"})
    for args, status in (((), 403), (("--allow-reset",), 200)):
        served = start_serve(isolated_home, *args)
        try:
            answer = httpx.delete(served.url + "/memory/reset", headers={"X-Api-Key": key}, timeout=10)
            assert answer.status_code == status, answer.text
        finally:
            served.stop()
    assert "holds no entries" in cli("recent", env={"MNEMO_PRINCIPAL": "alice"}).stdout
