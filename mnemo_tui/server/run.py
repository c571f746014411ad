"""Provides `serve()`: the app under uvicorn on a loopback port, with a clean shutdown on SIGINT and SIGTERM."""

from __future__ import annotations

import gc
import ipaddress
import logging
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TextIO

import uvicorn

from mnemo_tui.dburl import database_identity
from mnemo_tui.server.app import PREFIX, create_app
from mnemo_tui.server.deadlines import Deadlines
from mnemo_tui.server.edges import Edges
from mnemo_tui.server.follow import MAX_FOLLOWS
from mnemo_tui.server.logs import JsonFormatter
from mnemo_tui.server.mcp_mount import MAX_SUBSCRIPTIONS
from mnemo_tui.server.ratelimit import Limits


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


SPARE_FILES = 256  # descriptors kept for the store, its threads and the log besides the connections


def file_room(edges: Edges) -> Edges:
    """`edges` with room for its connections in the process's descriptor limit: the soft limit raised as
    far as the hard one allows, else fewer connections (said on stderr). Past the limit, accepting fails
    and every new client is reset."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = edges.max_connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
        if soft < wanted:
            fewer = max(1, soft - SPARE_FILES)
            sys.stderr.write(
                f"mnemo serve: the descriptor limit ({soft}) leaves room for {fewer} connections, "
                f"not {edges.max_connections}\n"
            )
            return edges.replace(max_connections=fewer)
    return edges


class Server(uvicorn.Server):
    """uvicorn's server, which ends every push follow as it begins to shut down: uvicorn waits for open
    answers to finish, and a stream never would (its clients reconnect elsewhere or later)."""

    def __init__(
        self, config: uvicorn.Config, end_streams: Callable[[], None], drain: Callable[[], None] = lambda: None
    ) -> None:
        super().__init__(config)
        self.end_streams = end_streams
        self.drain = drain

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not ready from the signal on (`/readyz`), before uvicorn's loop notices it.
        self.drain()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.end_streams()
        await super().shutdown(sockets=sockets)


FLUSH_SECONDS = 0.2
MAX_PENDING = 10_000  # lines held at most while the stream does not take them


class BatchedHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Log lines written in batches: at most `FLUSH_SECONDS` after they were logged, at once for a warning
    or worse, and all of them when the handler closes. A write per request was a system call on the
    event loop each time (and a hand-over of the interpreter to any database thread waiting for it)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._pending: list[str] = []
        self._second, self._stamp = -1, ""
        self._lost = 0  # lines the stream could not take
        self._stopped = threading.Event()
        self._flusher = threading.Thread(target=self._flush_now_and_then, name="mnemo-log", daemon=True)
        self._flusher.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._keep(self.format(record) + self.terminator)  # under the handler's lock
        except Exception:  # noqa: BLE001 - logging's own rule: a bad record never stops the program
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING:
            self.flush()

    def raw(self, text: str) -> None:
        """A line written as it is (a JSON access line, `server/logs.py`)."""
        with self.lock or nullcontext():
            self._keep(text + "\n")

    def line(self, name: str, message: str) -> None:
        """An INFO line of logger `name`, as the formatter would spell it, without building a record
        (the access log's one line a request)."""
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second, self._stamp = second, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        text = f"{self._stamp},{int((now - second) * 1000):03d} {name} INFO {message}\n"
        with self.lock or nullcontext():
            self._keep(text)

    def _keep(self, text: str) -> None:
        # Bounded: where the stream cannot take lines (it raises), the oldest pending ones go first.
        if len(self._pending) >= MAX_PENDING:
            del self._pending[: MAX_PENDING // 2]
            self._lost += MAX_PENDING // 2
        self._pending.append(text)

    def flush(self) -> None:
        with self.lock or nullcontext():
            lines, self._pending = self._pending, []
            if not lines:
                return
            try:
                self.stream.write("".join(lines))
                self.stream.flush()
            except Exception:  # noqa: BLE001 - a full disk or a closed pipe loses log lines, never a request
                self._lost += len(lines)

    def _flush_now_and_then(self) -> None:
        while not self._stopped.wait(FLUSH_SECONDS):
            self.flush()

    def close(self) -> None:
        self._stopped.set()
        self.flush()
        super().close()


def configure_logging(stream: TextIO, log_format: str = "text") -> BatchedHandler:
    """Access and error lines on `stream` (stderr), as text or one JSON object a line: the access log never
    holds a key or a header."""
    handler = BatchedHandler(stream)
    plain = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    handler.setFormatter(JsonFormatter() if log_format == "json" else plain)
    # A record carries no thread, process or source line (the format shows none): each costs a look-up.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    for name in ("mnemo.access", "mnemo.server", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return handler


def serve(
    store_path: Path | None,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    workers: int = 8,
    allow_reset: bool = False,
    database: str | None = None,
    pooled: bool = True,
    edges: Edges | None = None,
    max_follows: int = MAX_FOLLOWS,
    max_subscriptions: int = MAX_SUBSCRIPTIONS,
    subscription_send_seconds: float | None = None,
    limits: Limits | None = None,
    log_format: str = "text",
    metrics_on_loopback: bool = False,
    observed: bool = True,
) -> int:
    """Serve the store (or the PostgreSQL `database`) until SIGINT or SIGTERM, its connections bounded by
    `edges`, its push follows by `max_follows`, its MCP feed subscriptions by `max_subscriptions` (a listener cut
    when a notification waits `subscription_send_seconds`) and its request rates by `limits`, its log lines as
    `log_format` (`text` or `json`; the `ready at` line is text in every format); returns the exit code (0
    after a clean stop)."""
    edges = file_room(edges or Edges())
    log_handler = configure_logging(sys.stderr, log_format)
    deadlines = Deadlines()  # the server's one timer: its connections' header deadlines and its bodies'
    app = create_app(
        store_path,
        database=database,
        pooled=pooled,
        workers=workers,
        allow_reset=allow_reset,
        access=log_handler.raw if log_format == "json" else partial(log_handler.line, "mnemo.access"),
        max_follows=max_follows,
        max_subscriptions=max_subscriptions,
        subscription_send_seconds=subscription_send_seconds,
        deadlines=deadlines,
        limits=limits,
        observed=observed,
        log_format=log_format,
        metrics_on_loopback=metrics_on_loopback,
    )
    # Everything made so far (modules, the app, its routes) lives as long as the process: kept out of
    # the collector's passes, which then look only at what requests make.
    gc.collect()
    gc.freeze()
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
    options = edges.uvicorn_options(deadlines)
    options["http"].count_refusal = staticmethod(app.operations.metrics.refused)  # the edges' own refusals
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=5,
        **options,
    )
    server = Server(config, app.end_streams, app.operations.drain)
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
        log_handler.close()
    sys.stderr.write("mnemo serve: stopped\n")
    return 0
