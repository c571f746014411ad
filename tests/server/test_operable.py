"""An operable server (issue 63): `/metrics`, `/livez` and `/readyz`, request ids everywhere, JSON logs."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's note about httpx2: the test client works as it is
    from starlette.testclient import TestClient

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server.app import create_app
from mnemo_tui.server.probes import READY_WAIT
from tests.support.serve import start_serve
from tests.support.wire import serving

ROOM_NAME = "zz-secret-room-name"
DOMAIN = "zz-secret-domain"


class Served:
    def __init__(self, client: TestClient, store: Store, lines: list[str]) -> None:
        self.client = client
        self.store = store
        self.lines = lines

    def key(self, principal: str = "alice") -> str:
        return self.store.create_key(principal)[1]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    lines: list[str] = []
    store = Store(tmp_path / "s.db")
    with TestClient(create_app(tmp_path / "s.db", workers=2, access=lines.append), raise_server_exceptions=False) as c:
        yield Served(c, store, lines)
    store.close()


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition `text` (its labels in any order)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no sample {name}{labels} in:\n{text}")


def test_metrics_need_an_active_key(served: Served) -> None:
    refused = served.client.get("/metrics")
    assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHORIZED"
    key = served.key()
    served.store.revoke_key(served.store.list_keys()[0].key_id)
    assert served.client.get("/metrics", headers={"X-Api-Key": key}).status_code == 401
    answer = served.client.get("/metrics", headers={"Authorization": "Bearer " + served.key("bob")})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=0.0.4")


def test_requests_are_counted_by_method_route_template_and_status(served: Served) -> None:
    key = served.key()
    headers = {"X-Api-Key": key}
    written = served.client.post(
        "/api/v1/memory/write", json={"content": "hello there", "domain": DOMAIN}, headers=headers
    )
    atom = written.json()["atom_id"]
    assert served.client.get(f"/api/v1/memory/atoms/{atom}", headers=headers).status_code == 200
    assert served.client.get("/api/v1/memory/atoms/nope", headers=headers).status_code == 422
    served.client.post("/api/v1/memory/rooms", json={"name": ROOM_NAME}, headers=headers)
    served.client.post("/api/v1/memory/recent", json={}, headers={"X-Api-Key": "mk_" + "x" * 40})  # 401
    served.client.post("/api/v1/no/such/path", json={}, headers=headers)  # 404 unrouted
    served.client.request("BREW", "/api/v1/memory/recent", headers=headers)  # 405, a method of its own
    text = served.client.get("/metrics", headers=headers).text
    atoms = "/api/v1/memory/atoms/{atom_id}"
    assert metric(text, "mnemo_http_requests_total", method="GET", route=atoms, code="200") == 1
    assert metric(text, "mnemo_http_requests_total", method="GET", route=atoms, code="422") == 1
    assert metric(text, "mnemo_http_requests_total", method="POST", route="/api/v1/memory/write", code="200") == 1
    assert metric(text, "mnemo_http_requests_total", method="POST", route="unrouted", code="401") == 1
    assert metric(text, "mnemo_http_requests_total", method="OTHER", route="/api/v1/memory/recent", code="405") == 1
    assert metric(text, "mnemo_http_request_duration_seconds_count", method="GET", route=atoms) == 2
    assert metric(text, "mnemo_http_request_duration_seconds_bucket", method="GET", route=atoms, le="+Inf") == 2
    assert metric(text, "mnemo_http_request_duration_seconds_bucket", method="GET", route=atoms, le="10.0") == 2
    assert 0 < metric(text, "mnemo_http_request_duration_seconds_sum", method="GET", route=atoms) < 20
    assert metric(text, "mnemo_http_request_body_bytes_total", method="POST", route="/api/v1/memory/write") > 10
    assert metric(text, "mnemo_http_response_body_bytes_total", method="GET", route=atoms) > 50
    for kind in ("follow", "walk", "mcp"):
        assert metric(text, "mnemo_open_streams", kind=kind) == 0
    for reason in ("408", "413", "429", "431", "503"):
        assert metric(text, "mnemo_http_refusals_total", reason=reason) == 0
    assert metric(text, "mnemo_db_threads") == 2
    # No principal, key, room, domain, atom id, content or raw path in any label.
    for secret in ("alice", key, ROOM_NAME, DOMAIN, atom, "hello", "nope", "/no/such", "BREW"):
        assert secret not in text


def test_refusals_are_counted_by_reason(served: Served) -> None:
    headers = {"X-Api-Key": served.key()}
    big = served.client.post(
        "/api/v1/memory/write", content=b"x" * ((1 << 20) + 1), headers={**headers, "Content-Type": "application/json"}
    )
    assert big.status_code == 413
    text = served.client.get("/metrics", headers=headers).text
    assert metric(text, "mnemo_http_refusals_total", reason="413") == 1


def test_an_open_mcp_stream_is_counted_by_whoever_opens_it(served: Served) -> None:
    headers = {"X-Api-Key": served.key()}
    app: Any = served.client.app
    with app.operations.metrics.stream("mcp"):
        assert metric(served.client.get("/metrics", headers=headers).text, "mnemo_open_streams", kind="mcp") == 1
    assert metric(served.client.get("/metrics", headers=headers).text, "mnemo_open_streams", kind="mcp") == 0


def test_two_apps_in_one_process_count_apart(tmp_path: Path) -> None:
    one, two = create_app(tmp_path / "a.db", workers=1), create_app(tmp_path / "b.db", workers=1)
    try:
        with TestClient(one) as a, TestClient(two) as b:
            a.get("/livez")
            a.get("/livez")
            b.get("/livez")
            counted = {"method": "GET", "route": "/livez", "code": "200"}
            assert metric(one.operations.metrics.render().decode(), "mnemo_http_requests_total", **counted) == 2
            assert metric(two.operations.metrics.render().decode(), "mnemo_http_requests_total", **counted) == 1
    finally:
        one.close()
        two.close()


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian's prometheus package; scripts/setup-dev.sh)"
)
def test_promtool_accepts_the_exposition(served: Served) -> None:
    headers = {"X-Api-Key": served.key()}
    served.client.post("/api/v1/memory/write", json={"content": "a"}, headers=headers)
    served.client.post("/api/v1/memory/recent", json={}, headers=headers)
    text = served.client.get("/metrics", headers=headers).text
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "" and checked.stderr.strip() == "", checked.stdout + checked.stderr


def test_metrics_on_loopback_need_no_key_only_when_opened(tmp_path: Path) -> None:
    for opened, status in ((False, 401), (True, 200)):
        app = create_app(tmp_path / f"{opened}.db", workers=1, metrics_on_loopback=opened)
        try:
            with serving(app) as server:
                assert httpx.get(server.base + "/metrics", timeout=10).status_code == status
        finally:
            app.close()


# -- probes -------------------------------------------------------------------------------------------


def test_livez_and_readyz_need_no_key_and_list_their_checks(served: Served) -> None:
    assert served.client.get("/livez").text == "ok"
    assert served.client.get("/readyz").text == "ok"
    verbose = served.client.get("/readyz?verbose")
    assert verbose.status_code == 200
    assert verbose.text.splitlines() == ["[+]ping ok", "[+]shutdown ok", "[+]database ok", "readyz check passed"]
    assert served.client.get("/livez?verbose").text.splitlines() == ["[+]ping ok", "livez check passed"]
    for path in ("/api/v1/health", "/api/v1/ready", "/api/v1/health/ready"):  # the probes of before, as they were
        assert served.client.get(path).status_code == 200


def test_draining_is_not_ready_at_once_while_still_alive(served: Served) -> None:
    app: Any = served.client.app
    app.operations.drain()  # what SIGTERM does first (`run.Server.handle_exit`)
    ready = served.client.get("/readyz")
    assert ready.status_code == 503
    assert "[-]shutdown failed: the server is stopping" in ready.text and ready.text.endswith("readyz check failed\n")
    assert served.client.get("/livez").status_code == 200


def test_sigterm_drains_before_uvicorn_notices_it(tmp_path: Path) -> None:
    """`mnemo serve`'s uvicorn server marks the app draining in the signal handler itself."""
    import uvicorn

    from mnemo_tui.server.run import Server

    app = create_app(tmp_path / "d.db", workers=1)
    try:
        server = Server(uvicorn.Config(app), app.end_streams, app.operations.drain)
        assert not app.operations.draining
        server.handle_exit(signal.SIGTERM, None)
        assert app.operations.draining and server.should_exit
    finally:
        app.close()


def test_readyz_follows_the_database_away_and_back(pg_databases: Any) -> None:
    """PostgreSQL stopped hard: not ready within 5 s (the probe waits `READY_WAIT` at most), alive throughout,
    ready again within 15 s of its return."""
    from tests.support import pg

    assert READY_WAIT < 5
    cluster = pg.start_cluster()
    databases = pg.Databases(cluster)
    try:
        url = cluster.url(databases.create())
        app = create_app(database=url, workers=1)
        with TestClient(app, raise_server_exceptions=False) as client:
            assert client.get("/readyz").status_code == 200
            cluster.stop("immediate")
            stopped = time.monotonic()
            gone = client.get("/readyz?verbose")
            noticed = time.monotonic() - stopped
            assert gone.status_code == 503 and "[-]database failed" in gone.text, gone.text
            assert noticed < 5, noticed  # bounded by construction: one probe waits READY_WAIT at most
            assert client.get("/livez").status_code == 200
            assert client.get("/readyz").status_code == 503  # a probe joins the ping in flight, never queues
            cluster.start()
            back = time.monotonic()
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() - back < 15, "not ready 15 s after the database came back"
    finally:
        pg.stop_cluster(cluster, databases)


# -- request ids --------------------------------------------------------------------------------------


def test_a_sane_request_id_is_kept_and_any_other_replaced(served: Served) -> None:
    headers = {"X-Api-Key": served.key()}
    kept = served.client.post("/api/v1/memory/recent", json={}, headers={**headers, "X-Request-Id": "report-7"})
    assert kept.status_code == 200 and kept.headers["x-request-id"] == "report-7"
    for bad in ("x" * 129, "two words", "caf\u00e9"):
        answer = served.client.post("/api/v1/memory/recent", json={}, headers={**headers, "X-Request-Id": bad.encode()})
        made = answer.headers["x-request-id"]
        assert made != bad and len(made) == 16 and int(made, 16) >= 0
    made = served.client.get("/livez").headers["x-request-id"]
    assert len(made) == 16 and made != served.client.get("/livez").headers["x-request-id"]
    assert len(served.client.get("/livez").headers.get_list("x-request-id")) == 1


def test_the_request_id_is_in_the_envelope_the_header_and_the_access_line(served: Served) -> None:
    refused = served.client.post("/api/v1/memory/recent", json={})
    rid = refused.headers["x-request-id"]
    assert refused.json()["requestId"] == rid
    assert len(refused.headers.get_list("x-request-id")) == 1
    deadline = time.monotonic() + 10
    while not any(line.endswith(" rid=" + rid) for line in served.lines):  # written once the answer ended
        assert time.monotonic() < deadline, served.lines
        time.sleep(0.01)
    assert any('"POST /api/v1/memory/recent" 401' in line and line.endswith(" rid=" + rid) for line in served.lines)


def test_the_cli_prints_the_request_id_beside_a_server_error() -> None:
    from mnemo_tui.backends.remote_http import Answer, error_of

    body = json.dumps({"code": "INTERNAL", "message": "internal server error", "requestId": "abc123"}).encode()
    assert "(request id abc123)" in error_of(Answer(500, {}, body)).message
    hostile = json.dumps({"code": "INTERNAL", "message": "boom", "requestId": "a\x1b[2J"}).encode()
    assert "request id" not in error_of(Answer(500, {}, hostile)).message
    assert "(request id r-9)" in error_of(Answer(503, {"x-request-id": "r-9"}, b"not json")).message
    assert "request id" not in error_of(Answer(404, {"x-request-id": "r-9"}, b"{}")).message  # the caller's own


# -- structured logs ----------------------------------------------------------------------------------


def test_json_access_lines_name_the_key_by_its_id_never_the_key(tmp_path: Path) -> None:
    lines: list[str] = []
    store = Store(tmp_path / "j.db")
    key_id, key = store.create_key("alice")
    app = create_app(tmp_path / "j.db", workers=1, access=lines.append, log_format="json")
    with TestClient(app, raise_server_exceptions=False) as client:
        client.post("/api/v1/memory/write", json={"content": "very private"}, headers={"X-Api-Key": key})
        client.get("/api/v1/memory/atoms/x%2Fy", headers={"X-Api-Key": key, "X-Request-Id": "rid-1"})
    store.close()
    records = [json.loads(line) for line in lines]
    assert [r["route"] for r in records] == ["/api/v1/memory/write", "/api/v1/memory/atoms/{atom_id}"]
    first, second = records
    assert set(first) == {
        "time",
        "level",
        "logger",
        "request_id",
        "method",
        "route",
        "status",
        "duration_ms",
        "bytes_in",
        "bytes_out",
        "principal",
        "key_id",
    }
    assert first["key_id"] == key_id and first["principal"] == "alice" and first["status"] == 200
    assert second["request_id"] == "rid-1" and second["status"] == 422 and first["bytes_in"] > 0
    assert key not in "".join(lines) and "very private" not in "".join(lines)


@pytest.fixture
def json_serve(isolated_home: Path) -> Iterator[Any]:
    served = start_serve(isolated_home, "--log-format", "json")
    yield served
    if served.proc.poll() is None:
        served.proc.kill()
        served.proc.wait(timeout=10)


def test_serve_logs_json_and_keeps_the_ready_line(cli: Any, json_serve: Any) -> None:
    key = cli("keys", "create", "alice").stdout.strip()
    assert httpx.post(json_serve.url + "/memory/recent", json={}, headers={"X-Api-Key": key}).status_code == 200
    code, log = json_serve.stop(signal.SIGTERM)
    assert code == 0
    assert "mnemo serve: ready at http://127.0.0.1:" in log  # scripts wait for it, in every format
    access = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert any(r.get("route") == "/api/v1/memory/recent" and r["status"] == 200 for r in access), log
    assert all(r["level"] in ("INFO", "WARNING", "ERROR") and "time" in r for r in access)
    assert key not in log


def test_serve_refuses_an_unknown_log_format(cli: Any) -> None:
    result = cli("serve", "--log-format", "xml")
    assert result.code == 2 and "--log-format must be text or json" in result.stderr


def test_serve_counts_the_edges_refusals_and_opens_metrics_to_loopback(isolated_home: Path) -> None:
    served = start_serve(isolated_home, "--metrics-on-loopback", "--max-header-bytes", "1024")
    try:
        origin = served.url.removesuffix("/api/v1")
        assert httpx.get(origin + "/livez", headers={"X-Pad": "x" * 2048}, timeout=10).status_code == 431
        text = httpx.get(origin + "/metrics", timeout=10).text  # no key: a loopback client, the flag given
        assert metric(text, "mnemo_http_refusals_total", reason="431") == 1
    finally:
        code, log = served.stop(signal.SIGTERM)
    assert code == 0 and "Traceback" not in log
