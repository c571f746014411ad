"""Provides the ASGI app of `mnemo serve`: routes, authentication, body limits, the error envelope and the access log."""

from __future__ import annotations

import asyncio
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
from mnemo_tui.errors import LocalStateError, MnemoError, PayloadTooLarge, Unavailable
from mnemo_tui.server import auth, routes
from mnemo_tui.server.envelope import Refused, dumps, error, ok, request_id
from mnemo_tui.server.pool import DEFAULT_WORKERS, EnginePool, Opener
from mnemo_tui.server.routes import Call
from mnemo_tui.server.validate import document

MAX_BODY = 1 << 20  # 1 MiB
# What one request may cost the server at most (docs/security.md).
BODY_SECONDS = 10.0  # to send its whole body, once the key was checked
BODIES_IN_FLIGHT = 64 << 20  # bytes of bodies being received at once, over every connection
REQUEST_SECONDS = 5.0  # in a database thread (every statement stops past it)
HEALTH_SECONDS = 2.0
PREFIX = "/api/v1"
log = logging.getLogger("mnemo.server")
access = logging.getLogger("mnemo.access")

Work = Callable[[Engine, str, Call], Any]
Handler = Callable[[Request], Awaitable[Response]]


class BodyBudget:
    """The bytes of request bodies being received at once, bounded over every connection."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = BODIES_IN_FLIGHT if limit is None else limit
        self.used = 0

    def take(self, size: int) -> None:
        if self.used + size > self.limit:
            raise Unavailable("the server is receiving too many request bodies at once; retry shortly")
        self.used += size

    def give(self, size: int) -> None:
        self.used -= size


async def read_body(request: Request, budget: BodyBudget | None = None) -> bytes:
    """The request body, refused with 413 before it is read whole when it is over 1 MiB, with 408 when it
    takes over `BODY_SECONDS` to arrive, and with 503 when the bodies in flight would pass their budget."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise PayloadTooLarge(f"request body is over {MAX_BODY} bytes", details={"limit": MAX_BODY})
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY:
                    raise PayloadTooLarge(f"request body is over {MAX_BODY} bytes", details={"limit": MAX_BODY})
                if budget is not None:
                    budget.take(len(chunk))
                chunks.append(chunk)
    except TimeoutError:
        raise Refused(408, "REQUEST_TIMEOUT", f"the request body did not arrive within {BODY_SECONDS:g} s") from None
    finally:
        if budget is not None:
            budget.give(sum(len(c) for c in chunks))
    return b"".join(chunks)


def _translate(exc: BaseException) -> MnemoError:
    if isinstance(exc, LocalStateError):
        # The server's own store cannot be written (full disk, read-only mount): not the caller's fault.
        log.warning("store unavailable: %s", exc.message)
        return Unavailable(exc.message)
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
    """An authenticated endpoint: the key is checked before a byte of the body is read, then the work runs
    in a database thread as the key's principal."""

    async def handle(request: Request) -> Response:
        rid = request_id(request)
        try:
            key = auth.presented_key(request)
            pool: EnginePool = request.app.state.pool
            params = dict(request.path_params)
            headers = {"idempotency-key": v} if (v := request.headers.get("idempotency-key")) is not None else {}
            if body:
                who = await pool.run(lambda engine: engine.principal_for_key(key))
                request.scope["mnemo.principal"] = who
                call = Call(raw=await read_body(request, request.app.state.bodies), params=params, headers=headers)
                return ok(await pool.run(lambda engine: work(engine, who, call)))

            def run(engine: Engine) -> Any:
                who = engine.principal_for_key(key)
                request.scope["mnemo.principal"] = who
                return work(engine, who, Call(params=params, headers=headers))

            return ok(await pool.run(run))
        except Exception as exc:  # noqa: BLE001 - every failure becomes an envelope
            return error(_translate(exc), rid)

    return handle


async def health(request: Request) -> Response:
    """`GET /health` (no key): whether the store answers, on a thread of its own (never behind the pool)."""
    pool: EnginePool = request.app.state.health
    try:
        await pool.run(lambda engine: engine.ping())
    except Exception as exc:  # noqa: BLE001
        return error(_translate(exc) if isinstance(exc, MnemoError) else Unavailable("store unavailable"), None)
    return ok({"status": "ok", "database": True, "version": __version__})


async def ready(request: Request) -> Response:
    """`GET /ready` (no key): the readiness probe, the same check as `/health` (503 when the store is down)."""
    return await health(request)


async def health_ready(request: Request) -> Response:
    """`GET /health/ready` (no key): `ready` is whether the store answers; 503 with the same body when not."""
    pool: EnginePool = request.app.state.health
    try:
        await pool.run(lambda engine: engine.ping())
        up = True
    except Exception:  # noqa: BLE001
        up = False
    body = {
        "ready": up,
        "degraded": False,
        "checks": {"database": up, "engine": up, "warm": True},
        "version": __version__,
    }
    return Response(dumps(body), status_code=200 if up else 503, media_type="application/json")


def reset_refused(engine: Engine, who: str, call: Call) -> Any:
    """`DELETE /memory/reset` on a server not started with `--allow-reset`: the spec's 403."""
    raise Refused(
        403, "RESET_NOT_ALLOWED", "reset is not allowed on this server (start it with mnemo serve --allow-reset)"
    )


# Paths that answer without a key; every other /api/v1 path checks the key before it is routed.
PUBLIC = frozenset({PREFIX + "/health", PREFIX + "/ready", PREFIX + "/health/ready", "/openapi.json"})


async def _key_refusal(request: Request) -> Response | None:
    """The 401 a request to an unknown /api/v1 path, or with a wrong method, gets before its 404 or 405."""
    if request.url.path in PUBLIC or not request.url.path.startswith(PREFIX):
        return None
    try:
        key = auth.presented_key(request)
        pool: EnginePool = request.app.state.pool
        await pool.run(lambda engine: engine.principal_for_key(key))
    except Exception as exc:  # noqa: BLE001
        return error(_translate(exc), request_id(request))
    return None


async def openapi(request: Request) -> Response:
    """`GET /openapi.json` (no key)."""
    return ok(request.app.state.openapi)


async def http_error(request: Request, exc: Exception) -> Response:
    rid = request_id(request)
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status in (404, 405):
        refused = await _key_refusal(request)
        if refused is not None:
            return refused
    if status == 404:
        return error(Refused(404, "NOT_FOUND", f"no such endpoint: {request.method} {request.url.path}"), rid)
    if status == 405:
        answer = error(
            Refused(405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.url.path}"), rid
        )
        allow = (exc.headers or {}).get("Allow") if isinstance(exc, HTTPException) else None
        if allow:  # Starlette's order is a set's: sorted, so the header is the same on every run
            answer.headers["Allow"] = ", ".join(sorted(m.strip() for m in allow.split(",")))
        return answer
    detail = exc.detail if isinstance(exc, HTTPException) else "internal server error"
    return error(Refused(status, "INTERNAL" if status >= 500 else "BAD_REQUEST", str(detail)), rid)


async def internal_error(request: Request, exc: Exception) -> Response:
    return error(_translate(exc), request_id(request))


def loggable(text: str) -> str:
    """A field as the access log writes it: every control, quote, backslash and non-ASCII character
    escaped, so no request can write a line, or a field, of its own (`%0A` in a path arrives as a newline)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return text
    return text.encode("unicode_escape").decode("ascii").replace('"', "\\x22")


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
                    loggable(str(client[0])),
                    client[1],
                    loggable(scope["method"]),
                    loggable(auth.redact(scope["path"])),
                    status[0],
                    (time.perf_counter() - started) * 1000,
                    loggable(str(who)),
                )


def create_app(
    store_path: Path | str | None = None,
    *,
    database: str | None = None,
    migrate: bool = False,
    opener: Opener | None = None,
    workers: int = DEFAULT_WORKERS,
    request_seconds: float = REQUEST_SECONDS,
    allow_reset: bool = False,
) -> Starlette:
    """The app serving WIRE.md over an engine: the embedded store file at `store_path`, the PostgreSQL
    `database` (initialized when empty; an older schema migrated only with `migrate`), or what `opener` opens."""
    if opener is None and database is not None:
        from mnemo_tui.engine.postgres import PgStore

        # One connection pool per process, shared by the workers' engines and the health probe's.
        opener = partial(PgStore, database, migrate_schema=migrate, pool_size=workers + 1)
    if opener is None:
        assert store_path is not None
        path = Path(store_path)
        Store(path).close()  # created (and migrated) here, once; every later connection needs it to exist
        opener = partial(Store, path, create=False)
    pool = EnginePool(opener, workers=workers, limit=request_seconds)
    health_pool = EnginePool(opener, workers=1, limit=HEALTH_SECONDS)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            pool.close()
            health_pool.close()

    def at(path: str, work: Work, method: str, *, body: bool | None = None) -> Route:
        return Route(PREFIX + path, endpoint(work, body=method == "POST" if body is None else body), methods=[method])

    app = Starlette(
        routes=[
            Route(PREFIX + "/health", health, methods=["GET"]),
            Route(PREFIX + "/ready", ready, methods=["GET"]),
            Route(PREFIX + "/health/ready", health_ready, methods=["GET"]),
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
            at("/memory/stats", routes.stats, "GET"),
            at("/memory/feedback", routes.feedback, "POST"),
            at("/memory/write-batch", routes.write_batch, "POST"),
            at("/memory/write_batch", routes.write_batch, "POST"),
            at("/memory/graph", routes.graph, "POST"),
            at("/memory/consolidate", routes.consolidate, "POST"),
            at("/memory/atoms/by-external-ref", routes.atom_by_external_ref, "POST"),
            at("/memory/atoms/{atom_id}/chain", routes.atom_chain, "GET"),
            at("/memory/rooms/{room_id}/invites", routes.rooms_invites, "GET"),
            at("/memory/rooms/{room_id}", routes.rooms_delete, "DELETE"),
            at("/memory/export", routes.export, "GET"),
            at("/memory/domain/{domain}", routes.domain_delete, "DELETE"),
            at("/memory/reset", routes.reset if allow_reset else reset_refused, "DELETE"),
        ],
        middleware=[Middleware(AccessLog)],
        exception_handlers={HTTPException: http_error, Exception: internal_error},
        lifespan=lifespan,
    )
    # A path with a trailing slash is an unknown route (404 with the envelope), never a bare redirect.
    app.router.redirect_slashes = False
    app.state.pool = pool
    app.state.health = health_pool
    app.state.bodies = BodyBudget()
    app.state.openapi = dumps(document())
    return app
