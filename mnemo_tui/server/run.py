"""Provides `serve()`: the app under uvicorn on a loopback port, with a clean shutdown on SIGINT and SIGTERM."""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import TextIO

import uvicorn

from mnemo_tui.model import database_identity
from mnemo_tui.server.app import PREFIX, create_app


def is_loopback(host: str) -> bool:
    """Whether a host name or address stays on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0 picks a free one).

    It listens before uvicorn starts, so a client that connects as soon as the `ready` line is
    printed waits in the backlog instead of being refused.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def configure_logging(stream: TextIO) -> None:
    """Access and error lines on `stream` (stderr): the access log never holds a key or a header."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("mnemo.access", "mnemo.server", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False


def serve(
    store_path: Path | None,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    workers: int = 8,
    allow_reset: bool = False,
    database: str | None = None,
) -> int:
    """Serve the store (or the PostgreSQL `database`) until SIGINT or SIGTERM; returns the exit code (0 after a clean stop)."""
    configure_logging(sys.stderr)
    app = create_app(store_path, database=database, workers=workers, allow_reset=allow_reset)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}{PREFIX}"
    if not is_loopback(host):
        sys.stderr.write(
            f"mnemo serve: listening on {host}, beyond this machine; keys travel in clear without a TLS proxy in front\n"
        )
    where = f"database {database_identity(database)}" if database else f"store {store_path}"
    sys.stderr.write(f"mnemo serve: {where}\nmnemo serve: ready at {url} (Ctrl-C to stop)\n")
    sys.stderr.flush()
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    stopping: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    # uvicorn handles the signals while it runs, then re-raises them to the handlers found at
    # start: these keep that re-raise from killing the process after its clean shutdown.
    previous = {sig: signal.signal(sig, remember) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    sys.stderr.write("mnemo serve: stopped\n")
    return 0
