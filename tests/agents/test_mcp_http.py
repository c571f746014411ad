"""MCP over streamable HTTP at `/mcp` of a real `mnemo serve`, driven by clients no one here wrote: the official
`mcp` client in both revisions (2025-11-25 with a session, 2026-07-28 stateless; every successful result
validated by it against the tool's output schema) and the MCP Inspector CLI; and bad input over raw HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.mcp_client import MNEMO, WAIT, http_client
from tests.support.serve import ServeProcess, start_serve

HOSTED = json.loads((Path(__file__).parent / "hosted-tools-list.json").read_text(encoding="utf-8"))
# The MCP Inspector CLI and the Node it runs on, as scripts/setup-dev.sh installs them.
TOOLS = Path(__file__).resolve().parents[2] / ".tools" / "node_modules"
INSPECTOR = TOOLS / ".bin" / "mcp-inspector"
REVISIONS = ("legacy", "auto")  # legacy: the initialize handshake (2025-11-25); auto: discover (2026-07-28)
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


def mnemo(home: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", ""), "MNEMO_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run([MNEMO, *args], env=env, capture_output=True, text=True, check=True).stdout.strip()


class Served:
    def __init__(self, home: Path, process: ServeProcess, key: str, portal: BlockingPortal, stack: ExitStack) -> None:
        self.home, self.process, self.key, self.portal, self.stack = home, process, key, portal, stack
        self.url = process.url.removesuffix("/api/v1") + "/mcp"

    def client(self, mode: str, key: str | None = None, header: str = "authorization") -> Client:
        value = f"Bearer {key or self.key}" if header == "authorization" else key or self.key
        http = http_client(headers={header: value})
        client = Client(streamable_http_client(self.url, http_client=http), mode=mode)  # type: ignore[arg-type]
        entered: Client = self.stack.enter_context(self.portal.wrap_async_context_manager(client))
        return entered

    def call(self, client: Client, tool: str, **arguments: Any) -> Any:
        return self.portal.call(client.call_tool, tool, arguments)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("mcp-http")
    key = mnemo(home, "keys", "create", "alice")
    process = start_serve(home)
    try:
        with ExitStack() as stack:
            portal = stack.enter_context(start_blocking_portal())
            yield Served(home, process, key, portal, stack)
    finally:
        process.stop(signal.SIGTERM)


def text_of(result: Any) -> str:
    assert len(result.content) == 1
    return str(result.content[0].text)


@pytest.mark.parametrize("mode", REVISIONS)
def test_the_official_client_discovers_and_calls_every_tool_each_result_valid_against_its_schema(
    served: Served, mode: str
) -> None:
    client = served.client(mode)
    assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    tools = {t.name: t for t in served.portal.call(client.list_tools).tools}
    assert list(tools) == [t["name"] for t in HOSTED["tools"]]
    for hosted in HOSTED["tools"]:
        assert tools[hosted["name"]].input_schema == hosted["inputSchema"], hosted["name"]
        assert tools[hosted["name"]].output_schema is not None, hosted["name"]
    assert client.server_capabilities.resources is not None
    assert client.server_capabilities.resources.subscribe is True  # the feeds (test_feed_subscriptions.py)
    domain = f"http-{mode}"
    # The client raises when a success's structuredContent is missing or does not fit the schema.
    empty = served.call(client, "memory_list_recent", domain=domain)
    assert empty.structured_content == {
        "scope": domain,
        "items": [],
        "next_cursor": None,
        "stopped_early": False,
        "unsearched_rooms": None,
    }
    member_of = [
        {"name": r["name"], "address": r["address"]}
        for r in served.call(client, "memory_list_rooms").structured_content["rooms"]
    ]
    unscoped = served.call(client, "memory_read", query="nothing-like-this")
    assert unscoped.structured_content["items"] == [] and unscoped.structured_content["unsearched_rooms"] == member_of
    ids = []
    for n in range(3):
        written = served.call(client, "memory_write", content=f"over http {n}", domain=domain, concepts=["http"])
        assert not written.is_error, text_of(written)
        ids.append(written.structured_content["memory_id"])
        assert text_of(written) == f"Stored (importance: unknown). ID: {ids[-1]}"
    page = served.call(client, "memory_list_recent", domain=domain, limit=2)
    data = page.structured_content
    assert [i["atom_id"] for i in data["items"]] == ids[:0:-1] and data["next_cursor"]
    assert data["next_cursor"] in text_of(page)
    rest = served.call(client, "memory_list_recent", domain=domain, limit=2, cursor=data["next_cursor"])
    assert [i["atom_id"] for i in rest.structured_content["items"]] == ids[:1]
    assert rest.structured_content["next_cursor"] is None
    found = served.call(client, "memory_read", query="http", domain=domain)
    assert {i["atom_id"] for i in found.structured_content["items"]} == set(ids)
    rated = served.call(client, "memory_feedback", atom_ids=ids[:1], outcome=1)
    assert rated.structured_content == {"outcome": 1, "updated": 1}
    stats = served.call(client, "memory_stats").structured_content
    assert domain in stats["domains"] and stats["memories"] >= 3
    room = served.call(client, "memory_create_room", name=f"room {mode}").structured_content
    invite = served.call(client, "memory_invite_to_room", room_id=room["room_id"], scope="read").structured_content
    assert invite["code"] in invite["share_message"]
    joined = served.call(client, "memory_join_room", code=invite["code"]).structured_content
    assert joined["already_member"] and joined["address"] == room["address"]
    rooms = served.call(client, "memory_list_rooms").structured_content
    assert room["room_id"] in [r["room_id"] for r in rooms["rooms"]] and rooms["not_shown"] == 0
    assert served.call(client, "vault_list").structured_content == {"secrets": [], "not_shown": 0}
    item = served.portal.call(client.read_resource, f"memory://item/{ids[0]}")
    assert json.loads(item.contents[0].text)["content"] == "over http 0"
    prompt = served.portal.call(client.get_prompt, "recall", {"topic": "http"})
    assert "memory_read" in prompt.messages[0].content.text
    refused = served.call(client, "memory_read", query=5)
    assert refused.is_error and refused.structured_content is None


def test_structured_content_is_exact_where_the_text_is_sanitized(served: Served) -> None:
    client = served.client("2026-07-28", header="x-api-key")
    hostile = "red \x1b[31malert\x07 \u202eevil\\x1b"
    served.call(client, "memory_write", content=hostile, domain="hostile-http")
    page = served.call(client, "memory_list_recent", domain="hostile-http")
    assert page.structured_content["items"][0]["content"] == hostile
    assert "\x1b" not in text_of(page) and "\u202e" not in text_of(page) and "\\x1b[31malert" in text_of(page)


def test_every_session_and_call_is_the_keys_own_principal(served: Served) -> None:
    bob = mnemo(served.home, "keys", "create", "bob")
    alices = served.client("legacy")
    bobs = served.client("legacy", key=bob)
    served.call(alices, "memory_write", content="alice's own", domain="mine")
    assert served.call(bobs, "memory_list_recent", domain="mine").structured_content["items"] == []
    assert served.call(alices, "memory_list_recent", domain="mine").structured_content["items"]


def raw(served: Served, body: bytes | str, headers: dict[str, str] | None = None) -> httpx.Response:
    given = {**ACCEPT, "Authorization": f"Bearer {served.key}", **(headers or {})}
    return httpx.post(served.url, content=body, headers=given, timeout=WAIT)


def test_no_key_an_unknown_key_and_a_key_revoked_mid_session_are_401_with_www_authenticate(served: Served) -> None:
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer mk_live_" + "0" * 32}, {"X-Api-Key": "nope"}):
        answer = raw(served, json.dumps(INIT), headers)
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"] == 'Bearer realm="mnemo"'
        assert "resource_metadata" not in answer.headers["www-authenticate"]
        assert answer.json()["error"]["message"].startswith("UNAUTHORIZED")
    carol = mnemo(served.home, "keys", "create", "carol")
    opened = raw(served, json.dumps(INIT), {"Authorization": f"Bearer {carol}"})
    assert opened.status_code == 200
    session = {"Authorization": f"Bearer {carol}", "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert raw(served, json.dumps(note), session).status_code == 202
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert raw(served, json.dumps(listing), session).status_code == 200
    # Another key cannot use carol's session: the SDK answers as for an unknown one.
    other = raw(served, json.dumps(listing), {**session, "Authorization": f"Bearer {served.key}"})
    assert other.status_code == 404
    key_id = next(
        k["key_id"]
        for k in json.loads(mnemo(served.home, "keys", "list", "--format", "json"))
        if k["principal"] == "carol"
    )
    mnemo(served.home, "keys", "revoke", key_id)
    revoked = raw(served, json.dumps(listing), session)
    assert revoked.status_code == 401 and revoked.headers["www-authenticate"] == 'Bearer realm="mnemo"'


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        ("{not json", {}, 400),
        ('{"jsonrpc": "2.0", "id": 1}', {}, 400),
        ("[1, 2]", {}, 400),
        (json.dumps(INIT), {"Content-Type": "text/plain"}, 400),
        (json.dumps(INIT), {"Accept": "text/html"}, 406),
        (json.dumps(INIT), {"Host": "evil.example"}, 421),
        (json.dumps(INIT), {"Origin": "https://evil.example"}, 403),
    ],
)
def test_bad_input_is_the_spec_error_never_a_5xx(
    served: Served, body: str, headers: dict[str, str], status: int
) -> None:
    answer = raw(served, body, headers)
    assert answer.status_code == status, answer.text


def test_a_body_over_one_mib_is_413_with_a_json_rpc_error(served: Served) -> None:
    big = json.dumps({**INIT, "params": {**INIT["params"], "pad": "x" * (1 << 20)}})  # type: ignore[dict-item]
    answer = raw(served, big)
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == -32600 and "PAYLOAD_TOO_LARGE" in answer.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the bound holds as the body arrives
        for _ in range(20):
            yield b" " * (128 << 10)

    given = {**ACCEPT, "Authorization": f"Bearer {served.key}"}
    streamed = httpx.post(served.url, content=chunks(), headers=given, timeout=WAIT)
    assert streamed.status_code == 413 and streamed.json()["jsonrpc"] == "2.0"


def test_the_mcp_inspector_cli_lists_and_calls_the_tools(served: Served) -> None:
    assert INSPECTOR.exists(), "the MCP Inspector is missing: run scripts/setup-dev.sh"
    node = next(TOOLS.glob("node-linux-*/bin"))
    env = {"PATH": f"{node}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(served.home), "CI": "1"}
    base = [
        str(INSPECTOR),
        "--cli",
        served.url,
        "--transport",
        "http",
        "--header",
        f"Authorization: Bearer {served.key}",
    ]

    def inspect(*args: str) -> Any:
        done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=WAIT, check=False, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = inspect("--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == [t["name"] for t in HOSTED["tools"]]
    assert all("outputSchema" in t for t in listed["tools"])
    written = inspect(
        "--method", "tools/call", "--tool-name", "memory_write", "--tool-arg", "content=from the inspector"
    )
    memory_id = written["structuredContent"]["memory_id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", memory_id)
    recent = inspect("--method", "tools/call", "--tool-name", "memory_list_recent")
    assert memory_id in [i["atom_id"] for i in recent["structuredContent"]["items"]]


def test_a_draining_server_ends_its_event_streams_cleanly_and_a_session_starts_anew_after(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = tmp_path_factory.mktemp("mcp-drain")
    key = mnemo(home, "keys", "create", "dave")
    headers = {**ACCEPT, "Authorization": f"Bearer {key}"}
    first = start_serve(home)
    url = first.url.removesuffix("/api/v1") + "/mcp"
    try:
        opened = httpx.post(url, json=INIT, headers=headers, timeout=WAIT)
        session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert httpx.post(url, json=note, headers=session, timeout=WAIT).status_code == 202
        listen = {**session, "Accept": "text/event-stream"}
        with httpx.stream("GET", url, headers=listen, timeout=WAIT) as stream:
            assert stream.status_code == 200
            first.proc.send_signal(signal.SIGTERM)
            b"".join(stream.iter_bytes())  # the stream ends, its answer finished: a cut one would raise here
        assert first.proc.wait(timeout=WAIT) == 0
        # ended by the server as it began to stop, not cancelled by uvicorn once its graceful wait ran out
        assert "timeout graceful shutdown exceeded" not in "".join(first.lines)
    finally:
        if first.proc.poll() is None:
            first.stop(signal.SIGKILL)
    again = start_serve(home, port=int(url.rsplit(":", 1)[1].split("/")[0]))
    try:
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert httpx.post(url, json=listing, headers=session, timeout=WAIT).status_code == 404  # Session not found
        assert httpx.post(url, json=INIT, headers=headers, timeout=WAIT).status_code == 200  # a new one
    finally:
        again.stop(signal.SIGTERM)


def test_a_key_holds_at_most_32_requests_open_at_once_then_429_and_a_slot_frees_when_one_ends(served: Served) -> None:
    erin = mnemo(served.home, "keys", "create", "erin")
    headers = {**ACCEPT, "Authorization": f"Bearer {erin}"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with httpx.Client(timeout=WAIT, limits=httpx.Limits(max_connections=40)) as http, ExitStack() as streams:

        def admitted(method: str, given: dict[str, str], body: Any = None) -> httpx.Response:
            # A request's slot comes back once the server has finished it, a moment after its client has read
            # the answer: a request refused only for that is asked again (bounded).
            for _ in range(200):
                if method == "GET":
                    answer = streams.enter_context(http.stream("GET", served.url, headers=given))
                else:
                    answer = http.post(served.url, json=body, headers=given)
                if answer.status_code != 429:
                    return answer
                answer.close()
            raise AssertionError("the key's requests never came back")

        sessions = []
        for _ in range(32):  # each session's GET event stream stays open: one request each
            sid = admitted("POST", headers, INIT).headers["mcp-session-id"]
            sessions.append({**headers, "Mcp-Session-Id": sid})
            assert admitted("POST", sessions[-1], note).status_code == 202
            assert admitted("GET", {**sessions[-1], "Accept": "text/event-stream"}).status_code == 200
        refused = http.post(served.url, json=listing, headers=sessions[0])  # the 32 streams hold every slot
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["message"].startswith("TOO_MANY_MCP_REQUESTS")
        assert raw(served, json.dumps(INIT)).status_code == 200  # another key is not held back
        streams.close()  # the streams end: their slots come back as the server sees them close
        assert admitted("POST", sessions[0], listing).status_code == 200


def test_a_keys_rest_and_mcp_requests_count_against_its_one_rate(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from mnemo_tui.engine.sqlite.store import Store
    from mnemo_tui.server.app import create_app
    from mnemo_tui.server.ratelimit import Limits, Rate

    path = tmp_path / "s.db"
    store = Store(path)
    alice = store.create_key("alice")[1]
    store.close()
    limits = Limits(
        per_key=Rate(per_second=0.5, burst=2), per_address=Rate(per_second=1, burst=100), clock=lambda: 1000.0
    )
    app = create_app(path, workers=2, limits=limits)
    with TestClient(app, base_url="http://127.0.0.1:8080") as client:  # a loopback Host, as the SDK wants
        ask = {**ACCEPT, "X-Api-Key": alice}
        assert client.get("/api/v1/memory/stats", headers=ask).status_code == 200
        assert client.post("/mcp", json=INIT, headers=ask).status_code == 200
        refused = client.post("/mcp", json=INIT, headers=ask)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "2"  # a token in 2 s at 0.5/s
        assert refused.json()["error"]["message"].startswith("RATE_LIMITED")
        assert client.get("/api/v1/memory/stats", headers=ask).status_code == 429


def test_without_the_mcp_extra_the_server_serves_rest_and_mcp_is_an_unknown_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from starlette.testclient import TestClient

    from mnemo_tui.server.app import create_app

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else found(name, *a))
    app = create_app(tmp_path / "s.db", workers=1)
    assert app.mcp is None
    with TestClient(app, base_url="http://127.0.0.1:8080") as client:
        assert client.get("/api/v1/health").status_code == 200
        unknown = client.post("/mcp", json=INIT, headers=ACCEPT)
        assert unknown.status_code == 404 and unknown.json()["code"] == "NOT_FOUND"


# A server's app, its lifespan run, a REST request, then an MCP one: which of them loads the SDK.
_LAZY = """
import sys
from starlette.testclient import TestClient
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server.app import create_app

store = Store(sys.argv[1])
key = store.create_key("alice")[1]
store.close()
app = create_app(sys.argv[1], workers=1)
seen = []
with TestClient(app, base_url="http://127.0.0.1:8080") as client:
    answer = client.post("/api/v1/memory/recent", json={"limit": 5}, headers={"X-Api-Key": key})
    seen.append((answer.status_code, "mcp" in sys.modules))
    answer = client.post("/mcp", content=sys.argv[2], headers={**%r, "Authorization": "Bearer " + key})
    seen.append((answer.status_code, "mcp" in sys.modules, "serverInfo" in answer.text))
print(seen)
"""


def test_the_sdk_is_loaded_at_the_first_mcp_request_not_before(tmp_path: Path) -> None:
    # A server no agent reaches over HTTP never holds the SDK (~30 MB of an idle server's ~80); the first request
    # to /mcp loads it and is answered as any other.
    script = _LAZY % (ACCEPT,)
    found = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "s.db"), json.dumps(INIT)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "MNEMO_HOME": str(tmp_path)},
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[(200, False), (200, True, True)]"


def test_an_open_mcp_event_stream_is_counted_in_the_servers_metrics(served: Served) -> None:
    frank = mnemo(served.home, "keys", "create", "frank")
    headers = {**ACCEPT, "Authorization": f"Bearer {frank}"}
    metrics_url = served.url.removesuffix("/mcp") + "/metrics"

    def open_mcp_streams() -> float:
        text = httpx.get(metrics_url, headers={"Authorization": f"Bearer {frank}"}, timeout=WAIT).text
        found = re.search(r'^mnemo_open_streams\{kind="mcp"\} (\S+)$', text, re.MULTILINE)
        assert found is not None, text
        return float(found.group(1))

    before = open_mcp_streams()
    sid = httpx.post(served.url, json=INIT, headers=headers, timeout=WAIT).headers["mcp-session-id"]
    session = {**headers, "Mcp-Session-Id": sid}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(served.url, json=note, headers=session, timeout=WAIT).status_code == 202
    with httpx.stream("GET", served.url, headers={**session, "Accept": "text/event-stream"}, timeout=WAIT) as stream:
        assert stream.status_code == 200  # counted before its answer began
        assert open_mcp_streams() == before + 1
    for _ in range(400):  # the server sees the stream close a moment after the client does (bounded: ~20 s)
        if open_mcp_streams() == before:
            break
        threading.Event().wait(0.05)
    assert open_mcp_streams() == before
