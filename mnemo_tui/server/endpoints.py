"""Provides the endpoints of `mnemo serve` as Starlette sees them: what they share (`Served`, the app's state),
one path's methods (`Methods`), and the wrappers that run a route function of `routes.py` as the key's
principal, the streamed walk beside the JSON page, and the probes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from starlette.datastructures import State
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mnemo_tui import __version__
from mnemo_tui.engine.interface import Engine
from mnemo_tui.errors import MnemoError, Unavailable
from mnemo_tui.server import routes, walk_stream
from mnemo_tui.server.auth import header
from mnemo_tui.server.bounds import PerKey
from mnemo_tui.server.envelope import Refused, dumps, error, ok, translate
from mnemo_tui.server.follow import Bounds
from mnemo_tui.server.middleware import caller, read_body
from mnemo_tui.server.pool import LOOKUP, EnginePool
from mnemo_tui.server.routes import NONE, Call
from mnemo_tui.server.streamed import Streamed
from mnemo_tui.server.wake import Hub

Handler = Callable[[Request], Awaitable[Response]]
Work = Callable[[Engine, str, Call], Any]


class Served(State):
    """What every endpoint of one app shares, kept as the app's `state`: its database threads, the probes'
    thread, the follows' hub and bounds, the streams open, the OpenAPI document."""

    pool: EnginePool
    health: EnginePool
    openapi: bytes
    hub: Hub  # wakes the push follows (follow.py)
    follows: Bounds
    walks: PerKey  # each key's streamed walks open at once
    streams: set[Streamed]  # answers being streamed, told when the server stops
    translate: Callable[[BaseException], MnemoError]

    # Attributes kept as attributes: `State` keeps them in a dict reached through `__getattr__`, after a failed
    # lookup that builds an AttributeError on every read (~3k instructions each, a few a request).
    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def __init__(self, pool: EnginePool, health: EnginePool, openapi: bytes, hub: Hub, follows: Bounds) -> None:
        super().__init__()
        self.pool = pool
        self.health = health
        self.openapi = openapi
        self.hub = hub
        self.follows = follows
        self.walks = walk_stream.bound()
        self.streams = set()
        self.translate = translate

    async def principal(self, key: str) -> str:
        """The key's principal, checked before anything else of the request is read: on the event loop
        when the engine answers at once (an embedded store under no lock), else in a database thread."""
        found: str = await self.pool.run(lambda engine: engine.principal_for_key(key), at_once=LOOKUP)
        return found


class Methods:
    """One path's endpoints by method (GET answers HEAD), as a Starlette route's ASGI endpoint: any other method
    is 405 with `Allow` listing every method of the path. A literal path is its route's alone, so
    `/memory/rooms/join` is never a `{room_id}` whatever the method."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = dict(handlers)
        if "GET" in self.handlers:
            self.handlers.setdefault("HEAD", self.handlers["GET"])
        self.allow = ", ".join(sorted(self.handlers))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handlers.get(scope["method"])
        if handler is None:
            raise HTTPException(405, headers={"Allow": self.allow})
        answer = await handler(Request(scope, receive, send))
        await answer(scope, receive, send)


def endpoint(
    work: Work, served: Served, *, body: bool = True, at_once: str | None = None, wakes: bool = False
) -> Handler:
    """An authenticated endpoint: the body is read (the key was checked before, by the middleware), then the
    work runs in a database thread as the key's principal, or on the event loop when it can be done there at
    once (`at_once`, see `EnginePool.run`); one that may write (`wakes`) wakes the follows after it."""

    async def handle(request: Request) -> Response:
        who = caller(request).principal
        idempotency = header(request.scope, b"idempotency-key")
        # Every field in order (raw, params, headers): the quick way to build a `Value`, once per request.
        call = Call(
            await read_body(request) if body else b"",
            request.path_params,
            {"idempotency-key": idempotency} if idempotency is not None else NONE,
        )
        try:
            return ok(await served.pool.run(lambda engine: work(engine, who, call), at_once=at_once))
        finally:
            if wakes:  # it may have written (committed, or its fate unknown): the follows look
                served.hub.written()

    return handle


def recent_endpoint(served: Served, one_page: Handler) -> Handler:
    """`POST /memory/recent`: one page as JSON (`one_page`), or with `Accept: application/x-ndjson` the whole
    walk as NDJSON (`walk_stream`), whose first page is read before the answer starts, so that a bad body or
    cursor, or a key with `walk_stream.MAX_WALKS_PER_KEY` walks open (429), is refused with its status and
    envelope as for a page."""

    async def recent(request: Request) -> Response:
        if not walk_stream.wanted(header(request.scope, b"accept")):
            return await one_page(request)
        who = caller(request)
        query = routes.recent_query(Call(raw=await read_body(request)))
        served.walks.take(who.key)  # before any page is read: a key past its bound costs no database thread
        streaming = False
        try:
            first = await served.pool.run(partial(walk_stream.first, who=who.principal, query=query))
            give = partial(served.walks.give, who.key)
            walk = walk_stream.answer(
                served.pool,
                who.principal,
                query,
                first,
                request.receive,
                served.streams,
                give,
                partial(served.principal, who.key),
            )
            streaming = True  # the slot is the stream's now: given back when it ends, however it ends
            return walk
        finally:
            if not streaming:  # refused, or cancelled as the server stops: no stream holds the slot
                served.walks.give(who.key)

    return recent


def probe(served: Served) -> Handler:
    """`GET /health` and `GET /ready` (no key): whether the store answers, on a thread of its own (never behind the pool)."""

    async def health(request: Request) -> Response:
        try:
            await served.health.run(lambda engine: engine.ping())
        except Exception as exc:  # noqa: BLE001
            return error(translate(exc) if isinstance(exc, MnemoError) else Unavailable("store unavailable"), None)
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
        return Response(dumps(body), status_code=200 if up else 503, media_type="application/json")

    return health_ready


def openapi(served: Served) -> Handler:
    """`GET /openapi.json` (no key)."""

    async def document(request: Request) -> Response:
        return ok(served.openapi)

    return document


def reset_refused(engine: Engine, who: str, call: Call) -> Any:
    """`DELETE /memory/reset` on a server not started with `--allow-reset`: the spec's 403."""
    raise Refused(
        403, "RESET_NOT_ALLOWED", "reset is not allowed on this server (start it with mnemo serve --allow-reset)"
    )
