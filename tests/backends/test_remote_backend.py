"""The remote backend: identity, keys, tolerance of the hosted service's shapes, bounded retries, and the CLI over it."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.backends.remote_calls import key_principal
from mnemo_tui.catchup.walk import Walk, stream_wire
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import AuthError, Unavailable, ValidationError
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.wire import Canned, ThreadServer, refusing_port, served_store, serving

KEY = "mk_live_" + "3" * 32
ITEM = {
    "atom_id": "00000000-0000-4000-8000-000000000001",
    "content": "x",
    "domain": "general",
    "created_at": "2026-01-01T00:00:00Z",
}


@pytest.fixture
def canned() -> Iterator[tuple[Canned, ThreadServer]]:
    app = Canned()
    with serving(app) as server:
        yield app, server


def backend_on(server: ThreadServer, sleeps: list[float] | None = None, **kw: Any) -> RemoteBackend:
    return RemoteBackend(server.url, KEY, sleep=(sleeps if sleeps is not None else []).append, **kw)


def test_identity_is_the_endpoint_and_the_principal_a_digest_of_the_key() -> None:
    backend = RemoteBackend("http://127.0.0.1:9/api/v1/", KEY)
    other = RemoteBackend("http://127.0.0.1:9/api/v1", "mk_live_" + "4" * 32)
    assert backend.identity == other.identity == "http://127.0.0.1:9/api/v1"
    assert backend.principal == "key:" + hashlib.sha256(KEY.encode()).hexdigest()[:12] == key_principal(KEY)
    assert backend.principal != other.principal
    assert KEY not in backend.principal
    assert backend.kind == "remote"
    backend.close()
    other.close()


def test_an_endpoint_that_is_not_a_url_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        RemoteBackend("127.0.0.1:8765/api/v1", KEY)


# -- the hosted service's other shapes ------------------------------------------------------------


@pytest.mark.parametrize("end", [{}, {"next_cursor": ""}, {"next_cursor": None}], ids=["absent", "empty", "null"])
def test_a_missing_or_empty_next_cursor_ends_the_walk(canned: tuple[Canned, ThreadServer], end: dict[str, Any]) -> None:
    app, server = canned
    app.answer(200, {"items": [ITEM], "next_cursor": "c1"}).answer(200, {"items": [], **end})
    backend = backend_on(server)
    chunks = list(stream_wire(backend, RecentQuery()))
    assert [len(c) for c in chunks] == [1]
    sent = [json.loads(raw) for _m, _p, raw in app.seen]
    assert [s["cursor"] for s in sent] == [None, "c1"]
    assert all(s["limit"] == 100 for s in sent)


def test_a_detail_string_and_a_422_list_become_the_project_errors(canned: tuple[Canned, ThreadServer]) -> None:
    app, server = canned
    backend = backend_on(server)
    app.answer(401, {"detail": "Not authenticated"})
    with pytest.raises(AuthError, match=r"Not authenticated.*MNEMO_API_KEY.*mnemo login"):
        backend.recent(RecentQuery())
    app.answer(
        422, {"detail": [{"loc": ["body", "limit"], "msg": "Input should be less than or equal to 100", "type": "x"}]}
    )
    with pytest.raises(ValidationError, match=r"limit: Input should be less than or equal to 100"):
        backend.recent(RecentQuery())
    # The hosted service's (and `mnemo serve`'s) flat 422: `details.errors`, no top-level `detail`.
    flat = {
        "code": "VALIDATION_ERROR",
        "message": "limit: Input should be less than or equal to 100",
        "requestId": None,
        "retryable": False,
        "details": {"errors": [{"loc": ["body", "limit"], "msg": "Input should be ...", "type": "less_than_equal"}]},
    }
    app.answer(422, flat)
    with pytest.raises(ValidationError, match=r"^limit: Input should be less than or equal to 100$") as raised:
        backend.recent(RecentQuery())
    assert raised.value.details == flat["details"]


def test_retries_are_bounded_and_then_unavailable(canned: tuple[Canned, ThreadServer]) -> None:
    app, server = canned
    for _ in range(5):
        app.answer(503, b"upstream is down")
    sleeps: list[float] = []
    draws = iter([0.0, 1.0, 0.5, 1.0])
    backend = backend_on(server, sleeps, retries=4, backoff=0.25, max_wait=1.5, jitter=lambda: next(draws))
    with pytest.raises(Unavailable, match="after 5 attempts") as raised:
        backend.recent(RecentQuery())
    assert raised.value.exit_code == 5
    assert len(app.seen) == 5
    # backoff * 2**attempt, scaled by 0.5 + draw/2 (half to all of it), never past max_wait.
    assert sleeps == [0.25 * 0.5, 0.5 * 1.0, 1.0 * 0.75, 1.5]  # the last, 2.0 * 1.0, capped


def test_retry_after_as_an_http_date_is_honoured(canned: tuple[Canned, ThreadServer]) -> None:
    app, server = canned
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    app.answer(429, {"code": "RATE_LIMITED", "message": "slow", "retryable": True}, {"Retry-After": when})
    app.answer(200, {"items": [], "next_cursor": None})
    sleeps: list[float] = []
    backend_on(server, sleeps).recent(RecentQuery())
    assert len(sleeps) == 1 and 15 < sleeps[0] <= 20


def test_a_write_is_retried_only_when_it_cannot_have_been_stored(canned: tuple[Canned, ThreadServer]) -> None:
    app, server = canned
    stored = {"stored": True, "atom_id": ITEM["atom_id"], "superseded": []}
    backend = backend_on(server)
    app.answer(502, b"bad gateway")
    with pytest.raises(Unavailable):
        backend.write(WriteRequest(content="x"))
    assert len(app.seen) == 1  # a 502 may hide a stored write: no second one
    app.answer(503, {"code": "UNAVAILABLE", "message": "busy", "retryable": True}).answer(200, stored)
    assert backend.write(WriteRequest(content="x")).atom_id == ITEM["atom_id"]
    app.answer(502, b"bad gateway").answer(200, stored)
    assert backend.write(WriteRequest(content="x", external_ref="r-1")).atom_id == ITEM["atom_id"]
    assert len(app.seen) == 5


def test_an_unreachable_endpoint_is_unavailable_after_retries() -> None:
    with refusing_port() as sock:
        sleeps: list[float] = []
        backend = RemoteBackend(f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1", KEY, sleep=sleeps.append, retries=3)
        with pytest.raises(Unavailable, match="cannot reach"):
            backend.recent(RecentQuery())
        backend.close()
    assert len(sleeps) == 3


# -- against a real `mnemo serve` ------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ThreadServer, Store, str]]:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    with served_store(path) as server:
        yield server, store, key
    store.close()


def test_a_walk_uses_one_keep_alive_connection_and_the_access_log_holds_no_key(
    served: tuple[ThreadServer, Store, str],
) -> None:
    server, store, key = served
    local = LocalBackend(store, "alice")
    for i in range(250):
        local.write(WriteRequest(content=f"entry {i}"))
    lines: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = lines.append  # type: ignore[method-assign]
    logger = logging.getLogger("mnemo.access")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        backend = RemoteBackend(server.url, key)
        chunks = list(stream_wire(backend, RecentQuery(limit=7)))
        backend.close()
    finally:
        logger.removeHandler(handler)
    assert [len(c) for c in chunks] == [100, 100, 50]  # the streamed walk: a line a page of 100
    walk = [r for r in lines if "/memory/recent" in r.getMessage()]
    assert len(walk) == 1
    # Page by page (what a walk with a page budget, and an endpoint without the stream, does).
    logger.addHandler(handler)
    try:
        backend = RemoteBackend(server.url, key)
        pages = [e.atom_id for fresh in Walk(backend, RecentQuery(limit=100), max_pages=3).pages() for e in fresh]
        backend.close()
    finally:
        logger.removeHandler(handler)
    assert len(pages) == 250
    walk = [r for r in lines if "/memory/recent" in r.getMessage()][1:]
    assert len(walk) == 3
    ports = {r.getMessage().split(" ", 1)[0].rsplit(":", 1)[1] for r in walk}  # `host:port "METHOD path" ...`
    assert len(ports) == 1  # one client port: one connection
    assert all(key not in r.getMessage() for r in lines)


def test_no_key_exits_3_naming_the_ways_to_give_one(cli: Any, served: tuple[ThreadServer, Store, str]) -> None:
    server, _store, _key = served
    env = {"MNEMO_ENDPOINT": server.url, "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
    result = cli("recent", env=env)
    assert result.code == 3
    assert "MNEMO_API_KEY" in result.stderr and "mnemo login" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_refused_key_exits_3(cli: Any, served: tuple[ThreadServer, Store, str]) -> None:
    server, _store, _key = served
    result = cli("recent", env={"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": KEY})
    assert result.code == 3 and KEY not in result.stderr + result.stdout


def test_every_cli_command_works_over_an_endpoint(cli: Any, served: tuple[ThreadServer, Store, str]) -> None:
    server, store, key = served
    bob_key = store.create_key("bob")[1]
    alice = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key}
    bob = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": bob_key}

    def ok(*args: str, env: dict[str, str] = alice, input: str | None = None) -> str:
        result = cli(*args, env=env, input=input)
        assert result.code == 0, (args, result.stderr)
        assert key not in result.stdout + result.stderr and bob_key not in result.stdout + result.stderr
        return str(result.stdout)

    empty = json.loads(ok("recent", "--format", "json"))
    assert empty["items"] == [] and empty["empty_report"]["kind"] == "empty_scope"
    room = ok("rooms", "create", "design").strip()
    assert room.startswith("xroom:room_")
    report = json.loads(ok("recent", "--format", "json"))["empty_report"]
    assert report["unsearched_rooms"] == [{"name": "design", "address": room}]
    ids = [ok("write", f"note {i}", "--concept", "ci").strip() for i in range(5)]
    ok("write", "-", "--scope", "ops", input="from stdin\n")
    page = json.loads(ok("recent", "--limit", "2", "--format", "json"))
    assert len(page["items"]) == 2 and page["items"][1]["atom_id"] == ids[-1] and page["next_cursor"]
    everything = ok("recent", "--all", "--format", "ndjson").splitlines()
    assert len(everything) == 6
    table = ok("recent")
    assert "note 4" in table
    caught = json.loads(ok("catchup", "--format", "json"))
    assert len(caught["items"]) == 6 and caught["watermark"]["after"] is not None
    again = json.loads(ok("catchup", "--format", "json"))
    assert again["items"] == [] and again["empty_report"]["kind"] == "nothing_new"
    hits = json.loads(ok("search", "note", "--format", "json"))["items"]
    assert {h["atom_id"] for h in hits} == set(ids)
    code = ok("rooms", "invite", "design").strip()
    assert ok("rooms", "join", code, env=bob).strip() == room
    ok("write", "hello room", "--scope", room, env=bob)
    assert "hello room" in ok("recent", "--scope", room)
    listed = json.loads(ok("rooms", "list", "--format", "json", env=bob))
    assert [(r["address"], r["role"]) for r in listed] == [(room, "member")]
    ok("vault", "add", "db", "--context", "staging db", input="hunter2\n")
    vault = json.loads(ok("vault", "list", "--format", "json"))
    assert [s["alias"] for s in vault["secrets"]] == ["db"]
    assert "hunter2" not in json.dumps(vault) and base64.b64encode(b"hunter2").decode() not in json.dumps(vault)
    expected = "\n".join(ids) + "\n"
    verified = cli("verify", "--expect", "-", "--scope", "general", "--format", "json", env=alice, input=expected)
    assert verified.code == 0, verified.stderr
    checked = cli("check", "--format", "json", env=alice)
    assert checked.code in (0, 1) and json.loads(checked.stdout)["checks"]
    for embedded_only in (("keys", "list"), ("serve", "--port", "0")):
        refused = cli(*embedded_only, env=alice)
        assert refused.code == 2 and "embedded store only" in refused.stderr


def test_an_unreachable_endpoint_exits_5(cli: Any) -> None:
    with refusing_port() as sock:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1"
        result = cli("recent", env={"MNEMO_ENDPOINT": url, "MNEMO_API_KEY": KEY})
    assert result.code == 5 and "cannot reach" in result.stderr


def test_login_status_watermarks_and_demo_over_an_endpoint(cli: Any, served: tuple[ThreadServer, Store, str]) -> None:
    server, store, key = served
    LocalBackend(store, "alice").write(WriteRequest(content="hello"))
    no_keyring = {"MNEMO_ENDPOINT": server.url, "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
    refused = cli("login", "--insecure-storage", env=no_keyring, input="mk_live_" + "9" * 32 + "\n")
    assert refused.code == 3
    stored = cli("login", "--insecure-storage", env=no_keyring, input=key + "\n")
    assert stored.code == 0, stored.stderr
    assert key not in stored.stdout + stored.stderr
    # The key now comes from the credentials file: no MNEMO_API_KEY needed.
    caught = cli("catchup", "--format", "json", env=no_keyring)
    assert caught.code == 0, caught.stderr
    assert [i["content"] for i in json.loads(caught.stdout)["items"]] == ["hello"]
    status = cli("status", "--format", "json", env=no_keyring)
    assert status.code == 0, status.stderr
    data = json.loads(status.stdout)
    # The server names the key's principal (GET /mnemo/whoami) and keeps the watermarks, as its consumers.
    assert data["key_source"] == "file" and data["principal"] == "alice" and key not in status.stdout
    assert "by the server, as its consumers of this key's principal" in cli("status", env=no_keyring).stdout
    marks = cli("watermark", "list", "--format", "json", env=no_keyring)
    assert marks.code == 0 and len(json.loads(marks.stdout)) == 1
    demo = cli("demo", env=no_keyring)
    assert demo.code == 2 and "Traceback" not in demo.stderr
