"""Provides the ASGI app of `mnemo serve`: routes, authentication, body limits, the error envelope and the access log."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import Any

from mnemo_tui import __version__
from mnemo_tui.engine.interface import Engine
from mnemo_tui.engine.store import Store
from mnemo_tui.errors import LocalStateError, MnemoError, PayloadTooLarge, Unavailable
from mnemo_tui.server import (
    asgi,
    auth,
    follow,
    plane_routes,
    removals_route,
    routes,
    search_routes,
    wake,
    walk_stream,
    whoami_route,
)
from mnemo_tui.server.asgi import (
    ClientDisconnect,
    Receive,
    Request,
    Response,
    Route,
    Router,
    Scope,
    Send,
)
from mnemo_tui.server.envelope import Refused, dumps, error, ok, request_id
from mnemo_tui.server.follow import MAX_FOLLOWS, Bounds
from mnemo_tui.server.pool import DEFAULT_WORKERS, LOOKUP, READ, WRITE, EnginePool, Opener
from mnemo_tui.server.routes import Call
from mnemo_tui.server.wake import HEARTBEAT_SECONDS, Hub

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


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """The server's OpenAPI description (its component schemas are the hosted service's; `bodies.py` follows them)."""
    text = resources.files("mnemo_tui.server").joinpath("openapi.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


Handler = Callable[[Request], Awaitable[Response]]


class BodyBudget:
    """The request bodies being received at once, over every connection: their bytes, bounded, and how
    long each takes, watched by one timer for all of them (not a timer per request, which each would pay)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = BODIES_IN_FLIGHT if limit is None else limit
        self.used = 0
        self._due: dict[asyncio.Task[Any], float] = {}
        self._cut: set[asyncio.Task[Any]] = set()
        self._watching = False

    def take(self, size: int) -> None:
        if self.used + size > self.limit:
            raise Unavailable("the server is receiving too many request bodies at once; retry shortly")
        self.used += size

    def give(self, size: int) -> None:
        self.used -= size

    def expect(self, task: asyncio.Task[Any]) -> None:
        """`task` starts receiving a body, due within `BODY_SECONDS`."""
        loop = asyncio.get_running_loop()
        self._due[task] = loop.time() + BODY_SECONDS
        if not self._watching:
            self._watching = True
            loop.call_later(_period(), self._watch, loop)

    def arrived(self, task: asyncio.Task[Any]) -> bool:
        """`task` is done receiving; whether it was cut off for taking too long."""
        self._due.pop(task, None)
        if task in self._cut:
            self._cut.discard(task)
            return True
        return False

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        # A task in `_due` is suspended only in `receive()` (see `read_body`): cancelling it ends that wait.
        now = loop.time()
        for task, due in list(self._due.items()):
            if now >= due:
                del self._due[task]
                self._cut.add(task)
                task.cancel()
        if self._due:
            loop.call_later(_period(), self._watch, loop)
        else:
            self._watching = False


def _period() -> float:
    # A late body is cut off at most a tenth of its allowance after it was due.
    return max(0.01, BODY_SECONDS / 10)


async def read_body(request: Request, budget: BodyBudget) -> bytes:
    """The request body, refused with 413 before it is read whole when it is over 1 MiB, with 408 when it
    takes over `BODY_SECONDS` to arrive, and with 503 when the bodies in flight would pass their budget."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise PayloadTooLarge(f"request body is over {MAX_BODY} bytes", details={"limit": MAX_BODY})
    chunks: list[bytes] = []
    size = 0
    task = asyncio.current_task()
    assert task is not None
    budget.expect(task)
    try:
        more = True
        while more:
            chunk, more = await request.body_part()
            if not chunk:
                continue
            size += len(chunk)
            if size > MAX_BODY:
                raise PayloadTooLarge(f"request body is over {MAX_BODY} bytes", details={"limit": MAX_BODY})
            budget.take(len(chunk))
            chunks.append(chunk)
    except asyncio.CancelledError:
        if not budget.arrived(task):
            raise
        task.uncancel()
        raise Refused(408, "REQUEST_TIMEOUT", f"the request body did not arrive within {BODY_SECONDS:g} s") from None
    finally:
        budget.arrived(task)
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


class Served:
    """What every endpoint of one app shares: its database threads, the probes' thread, the budget of
    bodies in flight, the OpenAPI document."""

    def __init__(self, pool: EnginePool, health: EnginePool, openapi: bytes, hub: Hub, follows: Bounds) -> None:
        self.pool = pool
        self.health = health
        self.bodies = BodyBudget()
        self.openapi = openapi
        self.hub = hub  # wakes the push follows (follow.py)
        self.follows = follows
        self.walks = walk_stream.bound()  # each key's streamed walks open at once
        self.translate: Callable[[BaseException], MnemoError] = _translate

    async def principal(self, key: str) -> str:
        """The key's principal, checked before anything else of the request is read: on the event loop
        when the engine answers at once (an embedded store under no lock), else in a database thread."""
        return await self.pool.run(lambda engine: engine.principal_for_key(key), at_once=LOOKUP)


def endpoint(
    work: Work, served: Served, *, body: bool = True, at_once: str | None = None, wakes: bool = False
) -> Handler:
    """An authenticated endpoint: the key is checked before a byte of the body is read, then the work runs
    in a database thread as the key's principal, or on the event loop when it can be done there at once
    (`at_once`, see `EnginePool.run`)."""

    async def handle(request: Request) -> Response:
        try:
            key = auth.presented_key(request)
            headers = {"idempotency-key": v} if (v := request.headers.get("idempotency-key")) is not None else {}
            who = await served.principal(key)
            request.scope["mnemo.principal"] = who
            raw = await read_body(request, served.bodies) if body else b""
            call = Call(raw=raw, params=request.params, headers=headers)
            try:
                return ok(await served.pool.run(lambda engine: work(engine, who, call), at_once=at_once))
            finally:
                if wakes:  # it may have written (committed, or its fate unknown): the follows look
                    served.hub.written()
        except Exception as exc:  # noqa: BLE001 - every failure becomes an envelope
            return error(_translate(exc), request_id(request))

    return handle


def recent_endpoint(served: Served) -> Handler:
    """`POST /memory/recent`: one page as JSON, or with `Accept: application/x-ndjson` the whole walk as
    NDJSON (`walk_stream`), whose first page is read before the answer starts, so that a bad body, key
    or cursor, or a key with `walk_stream.MAX_WALKS_PER_KEY` walks open (429), is refused with its status
    and envelope as for a page."""
    one_page = endpoint(routes.recent, served, at_once=READ)

    async def recent(request: Request) -> Response:
        if not walk_stream.wanted(request.headers.get("accept")):
            return await one_page(request)
        try:
            key = auth.presented_key(request)
            who = await served.principal(key)
            request.scope["mnemo.principal"] = who
            query = routes.recent_query(Call(raw=await read_body(request, served.bodies)))
            served.walks.take(key)  # before any page is read: a key past its bound costs no database thread
        except Exception as exc:  # noqa: BLE001 - every failure becomes an envelope
            return error(_translate(exc), request_id(request))
        streaming = False
        try:
            first = await served.pool.run(partial(walk_stream.page, who=who, query=query))
            walk = walk_stream.answer(served.pool, who, query, first, request.receive, partial(served.walks.give, key))
            streaming = True  # the slot is the stream's now: given back when it ends, however it ends
            return walk
        except Exception as exc:  # noqa: BLE001
            return error(_translate(exc), request_id(request))
        finally:
            if not streaming:  # refused, or cancelled as the server stops: no stream holds the slot
                served.walks.give(key)

    return recent


def probe(served: Served) -> Handler:
    """`GET /health` and `GET /ready` (no key): whether the store answers, on a thread of its own (never behind the pool)."""

    async def health(request: Request) -> Response:
        try:
            await served.health.run(lambda engine: engine.ping())
        except Exception as exc:  # noqa: BLE001
            return error(_translate(exc) if isinstance(exc, MnemoError) else Unavailable("store unavailable"), None)
        return ok({"status": "ok", "database": True, "version": __version__})

    return health


def readiness(served: Served) -> Handler:
    """`GET /health/ready` (no key): `ready` is whether the store answers; 503 with the same body when not."""

    async def health_ready(request: Request) -> Response:
        try:
            await served.health.run(lambda engine: engine.ping())
            up = True
        except Exception:  # noqa: BLE001
            up = False
        body = {
            "ready": up,
            "degraded": False,
            "checks": {"database": up, "engine": up, "warm": True},
            "version": __version__,
        }
        return Response(dumps(body), status=200 if up else 503)

    return health_ready


def reset_refused(engine: Engine, who: str, call: Call) -> Any:
    """`DELETE /memory/reset` on a server not started with `--allow-reset`: the spec's 403."""
    raise Refused(
        403, "RESET_NOT_ALLOWED", "reset is not allowed on this server (start it with mnemo serve --allow-reset)"
    )


# The endpoints that only read, through an index, an answer of bounded size (a feed page, one entry or
# its chain, the room and secret lists): tried on the event loop first. Searches, the graph, counts,
# the domain list and the export always run in a database thread.
BOUNDED_READS = frozenset(
    {
        routes.recent,
        routes.atom_get,
        plane_routes.atom_chain,
        plane_routes.atom_by_external_ref,
        routes.rooms_list,
        plane_routes.rooms_invites,
        routes.vault_list,
    }
)

# One entry written (its size bounded by the body's): done on the event loop when its lock is free.
BOUNDED_WRITES = frozenset({routes.write})

# The POST endpoints that only read: every other POST or DELETE may write, and wakes the follows after it.
READS_BY_POST = frozenset(
    {
        routes.recent,
        search_routes.read,
        search_routes.read_batch,
        search_routes.query,
        plane_routes.graph,
        plane_routes.atom_by_external_ref,
        removals_route.removals,
    }
)

# Paths that answer without a key; every other /api/v1 path checks the key before it is routed.
PUBLIC = frozenset({PREFIX + "/health", PREFIX + "/ready", PREFIX + "/health/ready", "/openapi.json"})


async def _key_refusal(request: Request, served: Served) -> Response | None:
    """The 401 a request to an unknown /api/v1 path, or with a wrong method, gets before its 404 or 405."""
    if request.path in PUBLIC or not request.path.startswith(PREFIX):
        return None
    try:
        await served.principal(auth.presented_key(request))
    except Exception as exc:  # noqa: BLE001
        return error(_translate(exc), request_id(request))
    return None


async def unrouted(request: Request, served: Served, allow: set[str] | None) -> Response:
    """The answer to a request no route takes: 401 without a good key under /api/v1, else 404 for an
    unknown path or 405 (with `Allow`) for a method its path does not answer."""
    refused = await _key_refusal(request, served)
    if refused is not None:
        return refused
    rid = request_id(request)
    if allow is None:
        return error(Refused(404, "NOT_FOUND", f"no such endpoint: {request.method} {request.path}"), rid)
    answer = error(Refused(405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.path}"), rid)
    answer.headers["Allow"] = ", ".join(sorted(allow))
    return answer


def loggable(text: str) -> str:
    """A field as the access log writes it: every control, quote, backslash and non-ASCII character
    escaped, so no request can write a line, or a field, of its own (`%0A` in a path arrives as a newline)."""
    if _plain(text):
        return text
    return text.encode("unicode_escape").decode("ascii").replace('"', "\\x22")


def _plain(text: str) -> bool:
    # Character by character: text made of plain pieces is plain, and the other way round.
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def access_line(scope: Scope, status: int, started: float) -> str:
    """A request's access-log line: client, method, path (keys redacted), status, time. Never a header."""
    client = scope.get("client") or ("-", 0)
    host, method, path = str(client[0]), scope["method"], auth.redact(scope["path"])
    principal = str(scope.get("mnemo.principal", "-"))
    if not _plain(host + method + path + principal):  # one check for the four fields (all of them, nearly always)
        host, method, path, principal = loggable(host), loggable(method), loggable(path), loggable(principal)
    return '%s:%s "%s %s" %s %.1fms principal=%s' % (  # noqa: UP031 - the cheapest formatting there is
        host,
        client[1],
        method,
        path,
        status,
        (time.perf_counter() - started) * 1000,
        principal,
    )


def to_access_logger(line: str) -> None:
    """An access line as a record of the `mnemo.access` logger (`mnemo serve` writes them in batches instead)."""
    if access.isEnabledFor(logging.INFO):
        access.info("%s", line)


class App:
    """The ASGI app: routes a request, answers it (whole, or streamed), logs it; closes its database threads at shutdown."""

    def __init__(self, router: Router, served: Served, access: Callable[[str], None] = to_access_logger) -> None:
        self.router = router
        self.state = served
        self.access = access
        self.streams: set[asgi.Streamed] = set()  # answers being streamed, told when the server stops

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await asgi.lifespan(receive, send, self.shutdown)
            return
        if kind != "http":  # a websocket: refused
            await send({"type": "websocket.close", "code": 1008})
            return
        started = time.perf_counter()
        status = 500
        streamed: asgi.Streamed | None = None
        try:
            try:
                answer = await self._answer(scope, receive)
            except Exception as exc:  # noqa: BLE001 - the last word: an envelope, never a bare 500
                answer = error(_translate(exc), None)
            status = answer.status
            # Once the answer is on its way nothing more can be said: a failure sending it (the client
            # went away) ends the request.
            if isinstance(answer, asgi.Streamed):
                streamed = answer
                self.streams.add(streamed)
            await answer.send(send)
            abort = scope.get("mnemo.abort")
            if streamed is not None and streamed.stalled and abort is not None:
                abort()
                await asyncio.sleep(0)  # its connection_lost runs: uvicorn sees a client gone, not an unfinished answer
        finally:
            if streamed is not None:
                self.streams.discard(streamed)
            self.access(access_line(scope, status, started))

    async def _answer(self, scope: Scope, receive: Receive) -> Response:
        found = self.router.find(scope["method"], scope)
        if isinstance(found, asgi.Missing):
            return await unrouted(Request(scope, receive), self.state, found.allow)
        handler, params = found
        return await handler(Request(scope, receive, params))

    def end_streams(self) -> None:
        """Every push follow ends now (the server begins to stop), and every stream whose client does not
        read ends within `asgi.STOP_GRACE` (uvicorn would cancel it, with a traceback)."""
        self.state.hub.close()
        for stream in list(self.streams):
            stream.stop()

    async def shutdown(self) -> None:
        """The lifespan's end: the hub stops, and once its LISTEN connection is closed, the database threads
        (no connection of this server is left open, even one opened as it stopped)."""
        self.state.hub.close()
        await self.state.hub.wait_closed()
        self.close()

    def close(self) -> None:
        self.state.hub.close()
        self.state.pool.close()
        self.state.health.close()


async def openapi(request: Request, served: Served) -> Response:
    """`GET /openapi.json` (no key)."""
    return ok(served.openapi)


def create_app(
    store_path: Path | str | None = None,
    *,
    database: str | None = None,
    migrate: bool = False,
    pooled: bool = True,
    opener: Opener | None = None,
    workers: int = DEFAULT_WORKERS,
    request_seconds: float = REQUEST_SECONDS,
    allow_reset: bool = False,
    access: Callable[[str], None] = to_access_logger,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    max_follows: int = MAX_FOLLOWS,
) -> App:
    """The app serving WIRE.md over an engine: the embedded store file at `store_path`, the PostgreSQL
    `database` (initialized when empty; an older schema migrated only with `migrate`; `pooled`: behind a
    transaction pooler, see `PgStore`), or what `opener` opens;
    each request's access line goes to `access`; push follows send a heartbeat after `heartbeat_seconds` of
    silence, `max_follows` of them open at once."""
    if opener is None and database is not None:
        from mnemo_tui.engine.postgres import PgStore

        # One connection pool per process, shared by the workers' engines and the health probe's.
        opener = partial(PgStore, database, migrate_schema=migrate, pool_size=workers + 1, pooled=pooled)
    if opener is None:
        assert store_path is not None
        path = Path(store_path)
        Store(path).close()  # created (and migrated) here, once; every later connection needs it to exist
        opener = partial(Store, path, create=False)
    pool = EnginePool(opener, workers=workers, limit=request_seconds)
    served = Served(
        pool,
        EnginePool(opener, workers=1, limit=HEALTH_SECONDS, on_loop=False),
        dumps(document()),
        wake.hub(pool, database, pooled, heartbeat_seconds),
        Bounds(max_follows),
    )
    by_path: dict[str, dict[str, Handler]] = {}

    def at(path: str, work: Work, method: str, *, body: bool | None = None) -> None:
        at_once = READ if work in BOUNDED_READS else WRITE if work in BOUNDED_WRITES else None
        wakes = method in ("POST", "DELETE") and work not in READS_BY_POST
        handler = endpoint(work, served, body=method == "POST" if body is None else body, at_once=at_once, wakes=wakes)
        by_path.setdefault(PREFIX + path, {})[method] = handler

    health = probe(served)
    for probe_path, handler in (("/health", health), ("/ready", health), ("/health/ready", readiness(served))):
        by_path[PREFIX + probe_path] = {"GET": handler}
    by_path["/openapi.json"] = {"GET": partial(openapi, served=served)}
    by_path[PREFIX + "/memory/recent"] = {"POST": recent_endpoint(served)}
    by_path[PREFIX + "/memory/follow"] = {"POST": follow.handler(served, read_body)}
    by_path[PREFIX + whoami_route.PATH] = {"GET": whoami_route.handler(served)}
    at("/memory/read", search_routes.read, "POST")
    at("/memory/read-batch", search_routes.read_batch, "POST")
    at("/memory/query", search_routes.query, "POST")
    at("/memory/write", routes.write, "POST")
    at("/memory/rooms", routes.rooms_list, "GET")
    at("/memory/rooms", routes.rooms_create, "POST")
    at("/memory/rooms/join", routes.rooms_join, "POST")
    at("/memory/rooms/{room_id}/invites", routes.rooms_invite, "POST")
    at("/vault/secrets", routes.vault_list, "GET")
    at("/vault/secrets", routes.vault_add, "POST")
    at("/vault/secrets/by-alias/{alias}", routes.vault_sealed, "GET")
    at("/memory/atoms/{atom_id}", routes.atom_get, "GET")
    at("/memory/atoms/{atom_id}", routes.atom_delete, "DELETE")
    at("/memory/domains", routes.domains, "GET")
    at("/memory/stats", plane_routes.stats, "GET")
    at("/memory/feedback", plane_routes.feedback, "POST")
    at("/memory/write-batch", plane_routes.write_batch, "POST")
    at("/memory/write_batch", plane_routes.write_batch, "POST")
    at("/memory/graph", plane_routes.graph, "POST")
    at("/memory/consolidate", plane_routes.consolidate, "POST")
    at("/memory/atoms/by-external-ref", plane_routes.atom_by_external_ref, "POST")
    at("/memory/atoms/{atom_id}/chain", plane_routes.atom_chain, "GET")
    at("/memory/rooms/{room_id}/invites", plane_routes.rooms_invites, "GET")
    at("/memory/rooms/{room_id}", routes.rooms_delete, "DELETE")
    at("/memory/export", plane_routes.export, "GET")
    at("/memory/removals", removals_route.removals, "POST")
    at("/memory/domain/{domain}", plane_routes.domain_delete, "DELETE")
    at("/memory/reset", plane_routes.reset if allow_reset else reset_refused, "DELETE")
    # A path with a trailing slash is an unknown route (404 with the envelope), never a redirect.
    return App(Router([Route(path, handlers) for path, handlers in by_path.items()]), served, access)
