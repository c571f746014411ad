"""Loopback servers for the wire tests: a real `mnemo serve` app (or any ASGI app) under uvicorn in a thread."""

from __future__ import annotations

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

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, lifespan="on")
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
def serving(app: Any) -> Iterator[ThreadServer]:
    """Serve any ASGI app for the duration of the block."""
    server = ThreadServer(app).start()
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
