"""Loopback servers for the wire tests: a real `mnemo serve` app (or any ASGI app) under uvicorn in a thread."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Any

import uvicorn

from mnemo_tui import timefmt
from mnemo_tui.engine.feed import JoinedPage
from mnemo_tui.values.model import WirePage


async def read_body(receive: Any) -> bytes:
    """The whole body of an ASGI request."""
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            return raw


def joined(page: WirePage) -> JoinedPage:
    """A JSON answer's page as a streamed walk's part holds it (`JoinedPage`: its items' text joined)."""
    return JoinedPage(",".join(page.items).encode(), len(page.items), page.next_cursor)


def ids_of(page: JoinedPage) -> list[str]:
    """The atom ids of a streamed walk's page, in order."""
    return [item["atom_id"] for item in json.loads(b"[" + page.items + b"]")]


def without_accept(scope: dict[str, Any]) -> dict[str, Any]:
    """A request's scope without its `Accept`: the app answers a page of JSON, never the streamed walk (a
    test's middleware that rewrites one page, or that counts one request a page)."""
    return {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"accept"]}


class ThreadServer:
    """An ASGI app served by uvicorn on a free 127.0.0.1 port, in a daemon thread."""

    def __init__(self, app: Any, port: int = 0, sock: socket.socket | None = None, *, as_serve: bool = False) -> None:
        """`as_serve`: stop as `mnemo serve` does, its push follows ended first (`app` is then one of `create_app`)."""
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
        self.sock = sock
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=1
        )
        if as_serve:
            from mnemo_tui.server.run import Server

            self.server: uvicorn.Server = Server(config, app.end_streams)
        else:
            self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base + "/api/v1"

    def start(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@contextmanager
def serving(app: Any, port: int = 0, sock: socket.socket | None = None) -> Iterator[ThreadServer]:
    """Serve any ASGI app for the duration of the block (on `sock`, a bound socket, when given)."""
    server = ThreadServer(app, port, sock).start()
    try:
        yield server
    finally:
        server.stop()


def without_route(app: Any, path_part: str) -> Any:
    """`app` as an endpoint without a route (an older `mnemo serve`, or the hosted service): any path holding
    `path_part` answers 404 with the envelope and no reason, as an unknown path does there."""

    async def front(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and path_part in scope["path"]:
            body = b'{"code":"NOT_FOUND","message":"Not Found","retryable":false}'
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return front


@contextmanager
def serving_app(app: Any, front: Any = None) -> Iterator[ThreadServer]:
    """Serve an app of `create_app` (behind `front`, a test's ASGI app around it, when given) on a server of its
    own for the block, then close the app's thread pool and health probe."""
    try:
        with serving(app if front is None else front) as server:
            yield server
    finally:
        app.state.pool.close()
        app.state.health.close()


def read_answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of one HTTP/1.1 answer read off a raw socket (sized by Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection without an answer"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection within its answer"
        body += chunk
    return int(head.split(b" ")[1]), json.loads(body)


@contextmanager
def refusing_port() -> Iterator[socket.socket]:
    """A loopback socket bound without `listen()`, for the block: a connection to its port is refused,
    and no other test process can take the port meanwhile (a port picked then released could be)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock


@contextmanager
def served_store(path: Path | Any, *, workers: int = 4) -> Iterator[ThreadServer]:
    """Serve the embedded store at `path` (or a conftest `Target`) with the app `mnemo serve` runs, for the block.

    One uvicorn server per test process is started on first use and kept: each block mounts a
    fresh app (its own thread pool and connections) on it and closes that app's pool at the end,
    which spares every test a server start and stop.
    """
    from mnemo_tui.server.app import create_app

    app = path.app(workers=workers) if hasattr(path, "app") else create_app(path, workers=workers)
    server = _shared()
    _MOUNT.app = app
    try:
        yield server
    finally:
        _MOUNT.app = None
        app.state.pool.close()
        app.state.health.close()


class _Mount:
    """The shared server's app: whatever app the current test mounted (404 when none is)."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        app = self.app
        if app is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)


_MOUNT = _Mount()
_SHARED: list[ThreadServer] = []
_SHARED_LOCK = threading.Lock()


def _shared() -> ThreadServer:
    with _SHARED_LOCK:
        if not _SHARED:
            _SHARED.append(ThreadServer(_MOUNT).start())
        return _SHARED[0]


class Canned:
    """An ASGI app that answers each request with the next canned (status, body, headers), recording requests.

    `body` is a value to encode as JSON, or bytes sent as they are. With no canned answer left, `every(path)`
    gives the (status, body) of each further request, when given.
    """

    def __init__(self, every: Callable[[str], tuple[int, Any]] | None = None) -> None:
        self.answers: list[tuple[int, Any, dict[str, str]]] = []
        self.seen: list[tuple[str, str, bytes]] = []
        self.every = every

    def answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> Canned:
        self.answers.append((status, body, headers or {}))
        return self

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        raw = await read_body(receive)
        self.seen.append((scope["method"], scope["path"], raw))
        if self.answers:
            status, body, headers = self.answers.pop(0)
        elif self.every is not None:
            status, body, headers = (*self.every(scope["path"]), {})
        else:
            status, body, headers = 500, {"detail": "no answer left"}, {}
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in headers.items())]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": payload})


def from_schema(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    """A Hypothesis strategy for values a JSON schema allows (the subset the hosted OpenAPI uses).

    Optional properties are present or absent at random; open objects may carry extra fields.
    """
    from hypothesis import strategies as st

    def build(s: dict[str, Any]) -> Any:
        if "$ref" in s:
            return st.deferred(lambda: build(components[s["$ref"].rsplit("/", 1)[-1]]))
        if "anyOf" in s:
            return st.one_of([build(option) for option in s["anyOf"]])
        if "enum" in s:
            return st.sampled_from(s["enum"])
        kind = s.get("type")
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind == "integer":
            return st.integers(int(s.get("minimum", -(2**31))), int(s.get("maximum", 2**31)))
        if kind == "number":
            return st.floats(s.get("minimum", -1e6), s.get("maximum", 1e6), allow_nan=False, allow_infinity=False)
        if kind == "string":
            fmt = s.get("format")
            if fmt == "uuid":
                return st.uuids().map(str)
            if fmt == "date-time":
                return st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat().replace("+00:00", "Z"))
            low, high = int(s.get("minLength", 0)), min(int(s.get("maxLength", 40)), 40)
            if "pattern" in s:
                return st.from_regex(s["pattern"], fullmatch=True).filter(lambda t: low <= len(t) <= high)
            return st.text(min_size=low, max_size=max(low, high))
        if kind == "array":
            low = int(s.get("minItems", 0))
            return st.lists(
                build(s.get("items", {})), min_size=low, max_size=max(low, min(int(s.get("maxItems", 3)), 3))
            )
        if kind == "object" or "properties" in s:
            props: dict[str, Any] = s.get("properties", {})
            required = set(s.get("required", ()))
            fixed = st.fixed_dictionaries(
                {k: build(v) for k, v in props.items() if k in required},
                optional={k: build(v) for k, v in props.items() if k not in required},
            )
            if s.get("additionalProperties") is False or props:
                return fixed
            return st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=3)
        return st.none() | st.integers() | st.text(max_size=10)

    return build(schema)


class LateClock:
    """A tiny endpoint whose database lets a transaction that took an earlier time commit after a later one.

    It serves `/memory/recent` (offset cursors, inclusive `since`) and `/memory/rooms` from a list the
    test appends to with any `created_at` it likes.
    """

    def __init__(self) -> None:
        self.entries: list[tuple[int, str]] = []

    def add(self, created_at: int, atom_id: str) -> None:
        self.entries.append((created_at, atom_id))

    def item(self, created_at: int, atom_id: str) -> dict[str, Any]:
        return {
            "atom_id": atom_id,
            "content": f"entry {atom_id[:8]}",
            "domain": "general",
            "created_at": timefmt.to_iso(created_at),
            "concepts": [],
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        raw = await read_body(receive)
        answer: Any
        if scope["path"].endswith("/memory/rooms"):
            answer = []
        else:
            body = json.loads(raw)
            since = timefmt.parse_iso(body["since"]) if body.get("since") else None
            rows = sorted((e for e in self.entries if since is None or e[0] >= since), reverse=True)
            start = int(body["cursor"][1:]) if body.get("cursor") else 0
            limit = body.get("limit", 20)
            page = rows[start : start + limit]
            more = start + limit < len(rows)
            answer = {"items": [self.item(*e) for e in page]}
            if more:
                answer["next_cursor"] = f"o{start + limit}"  # absent at the end, as the hosted service may do
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
