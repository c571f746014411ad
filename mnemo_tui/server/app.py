"""Provides the ASGI app of `mnemo serve`: routes, authentication, body limits, the error envelope and the access log."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnemo_tui import __version__
from mnemo_tui.engine.interface import Engine
from mnemo_tui.engine.store import Store
from mnemo_tui.errors import MnemoError, PayloadTooLarge, Unavailable
from mnemo_tui.server import auth, routes
from mnemo_tui.server.envelope import Refused, dumps, error, ok, request_id
from mnemo_tui.server.pool import DEFAULT_WORKERS, EnginePool, Opener
from mnemo_tui.server.routes import Call
from mnemo_tui.server.validate import document

MAX_BODY = 1 << 20  # 1 MiB
PREFIX = "/api/v1"
log = logging.getLogger("mnemo.server")
access = logging.getLogger("mnemo.access")

Work = Callable[[Engine, str, Call], Any]
Handler = Callable[[Request], Awaitable[Response]]


async def read_body(request: Request) -> bytes:
    """The request body, refused with 413 before it is read whole when it is over 1 MiB."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise PayloadTooLarge(f"request body is over {MAX_BODY} bytes", details={"limit": MAX_BODY})
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise PayloadTooLarge(f"request body is over {MAX_BODY} bytes", details={"limit": MAX_BODY})
        chunks.append(chunk)
    return b"".join(chunks)


def _translate(exc: BaseException) -> MnemoError:
    if isinstance(exc, MnemoError):
        return exc
    if isinstance(exc, ClientDisconnect):
        return Refused(400, "VALIDATION_ERROR", "the request body was cut off")
    if isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in ("locked", "busy", "disk I/O")):
        log.warning("database busy or unavailable: %s", exc)
        return Unavailable("the store is busy; retry shortly")
    log.error("internal error", exc_info=exc)
    return Refused(500, "INTERNAL", "internal server error")


def endpoint(work: Work, *, body: bool = True) -> Handler:
    """An authenticated endpoint: key check, body read, then auth + work in one database thread."""

    async def handle(request: Request) -> Response:
        rid = request_id(request)
        try:
            key = auth.presented_key(request)
            raw = await read_body(request) if body else b""
            call = Call(raw=raw, params=dict(request.path_params))
            pool: EnginePool = request.app.state.pool

            def run(engine: Engine) -> Any:
                who = engine.principal_for_key(key)
                request.scope["mnemo.principal"] = who
                return work(engine, who, call)

            return ok(await pool.run(run))
        except Exception as exc:  # noqa: BLE001 - every failure becomes an envelope
            return error(_translate(exc), rid)

    return handle


async def health(request: Request) -> Response:
    """`GET /health` (no key): whether the store answers."""
    pool: EnginePool = request.app.state.pool
    try:
        await pool.run(lambda engine: engine.ping())
    except Exception as exc:  # noqa: BLE001
        return error(_translate(exc) if isinstance(exc, MnemoError) else Unavailable("store unavailable"), None)
    return ok({"status": "ok", "database": True, "version": __version__})


async def openapi(request: Request) -> Response:
    """`GET /openapi.json` (no key)."""
    return ok(request.app.state.openapi)


async def http_error(request: Request, exc: Exception) -> Response:
    rid = request_id(request)
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        return error(Refused(404, "NOT_FOUND", f"no such endpoint: {request.method} {request.url.path}"), rid)
    if status == 405:
        return error(Refused(405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.url.path}"), rid)
    detail = exc.detail if isinstance(exc, HTTPException) else "internal server error"
    return error(Refused(status, "INTERNAL" if status >= 500 else "BAD_REQUEST", str(detail)), rid)


async def internal_error(request: Request, exc: Exception) -> Response:
    return error(_translate(exc), request_id(request))


class AccessLog:
    """One line per request: client, method, path (keys redacted), status, time. Never a header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if access.isEnabledFor(logging.INFO):
                client = scope.get("client") or ("-", 0)
                who = scope.get("mnemo.principal", "-")
                access.info(
                    '%s:%s "%s %s" %s %.1fms principal=%s',
                    client[0],
                    client[1],
                    scope["method"],
                    auth.redact(scope["path"]),
                    status[0],
                    (time.perf_counter() - started) * 1000,
                    who,
                )


def create_app(
    store_path: Path | str | None = None, *, opener: Opener | None = None, workers: int = DEFAULT_WORKERS
) -> Starlette:
    """The app serving WIRE.md over an engine: the embedded store file at `store_path`, or what `opener` opens."""
    if opener is None:
        assert store_path is not None
        opener = partial(Store, Path(store_path))
    pool = EnginePool(opener, workers=workers)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            pool.close()

    def at(path: str, work: Work, method: str, *, body: bool | None = None) -> Route:
        return Route(PREFIX + path, endpoint(work, body=method == "POST" if body is None else body), methods=[method])

    app = Starlette(
        routes=[
            Route(PREFIX + "/health", health, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
            at("/memory/recent", routes.recent, "POST"),
            at("/memory/read", routes.read, "POST"),
            at("/memory/read-batch", routes.read_batch, "POST"),
            at("/memory/query", routes.query, "POST"),
            at("/memory/write", routes.write, "POST"),
            at("/memory/rooms", routes.rooms_list, "GET"),
            at("/memory/rooms", routes.rooms_create, "POST"),
            at("/memory/rooms/join", routes.rooms_join, "POST"),
            at("/memory/rooms/{room_id}/invites", routes.rooms_invite, "POST"),
            at("/vault/secrets", routes.vault_list, "GET"),
            at("/vault/secrets", routes.vault_add, "POST"),
            at("/vault/secrets/by-alias/{alias}", routes.vault_sealed, "GET"),
            at("/memory/atoms/{atom_id}", routes.atom_get, "GET"),
            at("/memory/atoms/{atom_id}", routes.atom_delete, "DELETE"),
            at("/memory/domains", routes.domains, "GET"),
        ],
        middleware=[Middleware(AccessLog)],
        exception_handlers={HTTPException: http_error, Exception: internal_error},
        lifespan=lifespan,
    )
    # A path with a trailing slash is an unknown route (404 with the envelope), never a bare redirect.
    app.router.redirect_slashes = False
    app.state.pool = pool
    app.state.openapi = dumps(document())
    return app
