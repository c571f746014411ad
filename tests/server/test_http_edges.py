"""The HTTP edges of `mnemo serve` (docs/security.md): routing on the raw path, bounded headers and connections."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.server.app import create_app
from mnemo_tui.server.edges import Edges
from mnemo_tui.values.writes import WriteRequest
from tests.support.serve import ServeProcess, start_serve


def test_a_domain_with_a_slash_is_wiped_through_its_escaped_segment(isolated_home: Path, cli: Any) -> None:
    key = cli("keys", "create", "alice").stdout.strip()
    served = start_serve(isolated_home)
    try:
        with httpx.Client(base_url=served.url, headers={"X-Api-Key": key}, timeout=10) as client:
            for content, domain in (("a", "team/alpha"), ("b", "team/alpha"), ("c", "team"), ("d", "team%2Falpha")):
                written = client.post("/memory/write", json={"content": content, "domain": domain})
                assert written.status_code == 200, written.text
            wiped = client.delete("/memory/domain/team%2Falpha")
            assert wiped.status_code == 200, wiped.text
            assert wiped.json()["domain"] == "team/alpha" and wiped.json()["deleted"] == 2
            # Each segment is decoded once: `%25` is a percent sign, never the start of another escape.
            once = client.delete("/memory/domain/team%252Falpha")
            assert once.json()["domain"] == "team%2Falpha" and once.json()["deleted"] == 1
            # An escaped slash never splits a segment: this names no endpoint.
            assert client.delete("/memory/domain/team%2Falpha/x").status_code == 404
            assert client.post("/memory%2Frecent", json={}).status_code == 404
            left = client.post("/memory/recent", json={"limit": 10}).json()["items"]
        assert [item["content"] for item in left] == ["c"]
    finally:
        served.stop()


# -- bounded headers and connections (docs/security.md, "The HTTP edges") ----------------------------
# Each server runs with small bounds; the tests assert the answer and the close, never a latency.

HEALTH = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n"
SAFETY = 60  # seconds a socket waits at most before the test fails: a hang is a failure, not a pass


@dataclass
class Edge:
    served: ServeProcess
    port: int
    key: str


def _start(home: Path, *args: str) -> Edge:
    store = Store(home / "store.db")
    key = store.create_key("alice")[1]
    store.close()
    served = start_serve(home, *args)
    port = int(served.url.split(":")[2].split("/")[0])
    return Edge(served, port, key)


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edge]:
    """A `mnemo serve` that wants a request's headers within 1 s and in at most 1024 bytes."""
    running = _start(tmp_path_factory.mktemp("home"), "--header-timeout", "1", "--max-header-bytes", "1024")
    yield running
    running.served.stop()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=SAFETY)


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def _exchange(port: int, data: bytes) -> bytes:
    with _connect(port) as sock:
        sock.sendall(data)
        return _until_closed(sock)


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "still_arriving"])
def test_headers_past_the_bound_are_431_and_closed(edge: Edge, whole: bool) -> None:
    big = HEALTH + b"X-Big: " + b"a" * 3000 + (b"\r\n\r\n" if whole else b"")
    answer = _exchange(edge.port, big)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b'"code":"HEADERS_TOO_LARGE"' in answer
    assert _exchange(edge.port, HEALTH + b"X-Small: " + b"a" * 500 + b"\r\nConnection: close\r\n\r\n").startswith(
        b"HTTP/1.1 200 "
    )


def test_headers_that_stop_arriving_are_408_and_closed(edge: Edge) -> None:
    answer = _exchange(edge.port, HEALTH)  # the blank line that ends the headers never comes
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b'"code":"REQUEST_TIMEOUT"' in answer


def test_headers_streamed_slowly_are_cut_off_at_their_deadline(edge: Edge) -> None:
    """A byte now and then does not keep the connection: the deadline runs from its start."""
    with _connect(edge.port) as sock:
        sock.sendall(HEALTH)
        answer = b""
        for i in range(600):  # 30 s of streaming at most, far past the 1 s allowed
            ready, _, _ = select.select([sock], [], [], 0.05)
            if ready:
                answer = _until_closed(sock)
                break
            try:
                sock.sendall(b"X-%d: y\r\n" % i)
            except (BrokenPipeError, ConnectionResetError):
                answer = _until_closed(sock)
                break
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]


def test_a_silent_connection_and_an_idle_one_are_closed(edge: Edge) -> None:
    with _connect(edge.port) as silent:
        assert _until_closed(silent) == b""
    with _connect(edge.port) as idle:
        idle.sendall(HEALTH + b"\r\n")
        answer = _until_closed(idle)  # answered, then closed once idle (no 408: it had begun nothing)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.count(b"HTTP/1.1") == 1


def test_a_request_being_answered_is_not_cut_by_the_header_deadline(edge: Edge) -> None:
    """The deadline is for the headers: a body sent slowly, past it, is still read (the app bounds bodies)."""
    body = b'{"content":"slow"}'
    head = b"POST /api/v1/memory/write HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
    with _connect(edge.port) as sock:
        sock.sendall(head + b"X-Api-Key: %s\r\nContent-Length: %d\r\n\r\n" % (edge.key.encode(), len(body)))
        for byte in body:  # 18 pauses of 0.1 s: past the 1 s header deadline
            ready, _, _ = select.select([sock], [], [], 0.1)
            assert not ready, sock.recv(200)  # nothing said, nothing closed, before the body is whole
            sock.sendall(bytes([byte]))
        answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


def test_connections_past_the_cap_get_503_at_once_and_room_comes_back(tmp_path: Path) -> None:
    running = _start(tmp_path, "--max-connections", "2", "--header-timeout", "600")
    try:
        held = [_connect(running.port) for _ in range(2)]
        for sock in held:
            sock.sendall(HEALTH)  # headers begun, never ended: each holds its place
        # The server accepts in order: by the time it takes this one, it holds the two.
        answer = _exchange(running.port, HEALTH + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
        assert b'"retryable":true' in answer and b"retry-after: 1" in answer.lower()
        for sock in held:
            sock.close()
        for _ in range(200):  # until the server has seen them go
            answer = _exchange(running.port, HEALTH + b"Connection: close\r\n\r\n")
            if not answer.startswith(b"HTTP/1.1 503 "):
                break
            select.select([], [], [], 0.05)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    finally:
        running.served.stop()


# -- a send deadline on every answer (issue 50) ------------------------------------------------------


@contextmanager
def _edged(app: Any, edges: Edges) -> Iterator[tuple[int, uvicorn.Server]]:
    """`app` under uvicorn with the bounds of `edges`, as `mnemo serve` runs it, in a thread; yields its port
    and the server (whose `server_state` counts the connections it holds)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", **edges.uvicorn_options())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(2000):  # bounded: 10 s at most for it to start
        if server.started:
            break
        select.select([], [], [], 0.005)
    try:
        assert server.started
        yield sock.getsockname()[1], server
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def test_an_answer_nobody_reads_is_dropped_at_the_send_deadline(tmp_path: Path) -> None:
    """A plain answer (the export, 30 MB) to a client that takes nothing: its connection is aborted once
    nothing was taken for the send deadline, so the bytes it holds are freed, and the server serves on."""
    path = tmp_path / "store.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    store.bulk_insert([("alice", WriteRequest(content=f"{i:05d} " + "x" * 9_990), 1_000_000 + i) for i in range(3000)])
    store.close()
    app = create_app(path, workers=2)
    with _edged(app, Edges(send_seconds=0.5, header_seconds=600)) as (port, server):
        reader = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel holds little of it for us
        reader.settimeout(SAFETY)
        reader.connect(("127.0.0.1", port))
        try:
            reader.sendall(b"GET /api/v1/memory/export HTTP/1.1\r\nHost: x\r\nX-Api-Key: %s\r\n\r\n" % key.encode())
            # The answer has begun, so the server holds the connection: an empty set before this is a server
            # that has not accepted it yet, not a drop.
            assert select.select([reader], [], [], SAFETY)[0]
            for _ in range(1200):  # 60 s at most, far past the deadline: a connection kept is a failure
                if not server.server_state.connections:
                    break
                select.select([], [], [], 0.05)
            assert not server.server_state.connections  # dropped by the server, the client still connected
            got = b""
            while chunk := reader.recv(1 << 20):  # what the kernel had taken before the drop, then the end
                got += chunk
        finally:
            reader.close()
        head, _, body = got.partition(b"\r\n\r\n")
        declared = int(
            next(v for k, v in (line.split(b": ", 1) for line in head.split(b"\r\n")[1:]) if k == b"content-length")
        )
        assert head.startswith(b"HTTP/1.1 200 ") and 0 < len(body) < declared  # cut: the rest was freed, never sent
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=SAFETY) as client:
            assert client.get("/health").status_code == 200
    app.close()
