"""Loopback servers for the wire tests: a real `mnemo serve` app (or any ASGI app) under uvicorn in a thread."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn


class ThreadServer:
    """An ASGI app served by uvicorn on a free 127.0.0.1 port, in a daemon thread."""

    def __init__(self, app: Any, port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=1
        )
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
def serving(app: Any, port: int = 0) -> Iterator[ThreadServer]:
    """Serve any ASGI app for the duration of the block."""
    server = ThreadServer(app, port).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def served_store(path: Path, *, workers: int = 4) -> Iterator[ThreadServer]:
    """Serve the embedded store at `path` exactly as `mnemo serve` does."""
    from mnemo_tui.server.app import create_app

    with serving(create_app(path, workers=workers)) as server:
        yield server


class Canned:
    """An ASGI app that answers each request with the next canned (status, body, headers), recording requests.

    `body` is a value to encode as JSON, or bytes sent as they are.
    """

    def __init__(self) -> None:
        self.answers: list[tuple[int, Any, dict[str, str]]] = []
        self.seen: list[tuple[str, str, bytes]] = []

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
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen.append((scope["method"], scope["path"], raw))
        status, body, headers = self.answers.pop(0) if self.answers else (500, {"detail": "no answer left"}, {})
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in headers.items())]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": payload})
