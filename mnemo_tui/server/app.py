"""Provides the Starlette app of `mnemo serve`: its middleware, exception handlers, lifespan and route table."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.convertors import register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import MnemoError
from mnemo_tui.server import (
    consumers,
    follow,
    mcp_mount,
    plane_routes,
    removals_route,
    routes,
    search_routes,
    wake,
    whoami_route,
)
from mnemo_tui.server.deadlines import Deadlines
from mnemo_tui.server.endpoints import (
    Handler,
    Methods,
    Served,
    Work,
    endpoint,
    openapi,
    probe,
    readiness,
    recent_endpoint,
    reset_refused,
)
from mnemo_tui.server.envelope import dumps
from mnemo_tui.server.follow import MAX_FOLLOWS, Bounds
from mnemo_tui.server.logs import json_access_line
from mnemo_tui.server.metrics import Metrics
from mnemo_tui.server.middleware import (
    AccessLog,
    BodyLimits,
    Envelope,
    Keys,
    RawPath,
    Segment,
    key_refusal,
    refused,
    unrouted,
)
from mnemo_tui.server.pool import DEFAULT_WORKERS, READ, WRITE, EnginePool, Opener
from mnemo_tui.server.probes import Operations, livez, metrics_endpoint, readyz
from mnemo_tui.server.ratelimit import Limits
from mnemo_tui.server.wake import HEARTBEAT_SECONDS

MAX_BODY = 1 << 20  # 1 MiB
# What one request may cost the server at most (docs/security.md); read when an app is made.
BODY_SECONDS = 10.0  # to send its whole body, once the key was checked
BODIES_IN_FLIGHT = 64 << 20  # bytes of bodies being received at once, over every connection
REQUEST_SECONDS = 5.0  # in a database thread (every statement stops past it)
HEALTH_SECONDS = 2.0
PREFIX = "/api/v1"

# `{name:segment}`: one whole segment of the raw path, decoded once (`middleware.RawPath`).
register_url_convertor("segment", Segment())


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """The server's OpenAPI description (its component schemas are the hosted service's; `bodies.py` follows them)."""
    text = resources.files("mnemo_tui.server").joinpath("openapi.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


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
        consumers.commit,  # a consumer's position is no entry: no follow has anything to see
    }
)

# Paths that answer without a key; every other /api/v1 path checks the key before it is routed.
# The paths that need no key (`/metrics` checks its own: server/probes.py).
PUBLIC = frozenset(
    {PREFIX + "/health", PREFIX + "/ready", PREFIX + "/health/ready", "/openapi.json", "/livez", "/readyz"}
)
access_log = logging.getLogger("mnemo.access")


def to_access_logger(line: str) -> None:
    """An access line as a record of the `mnemo.access` logger (`mnemo serve` writes them in batches instead)."""
    if access_log.isEnabledFor(logging.INFO):
        access_log.info("%s", line)


class App(Starlette):
    """The Starlette app of `mnemo serve`; its `state` is what its endpoints share (`Served`), and it ends its
    streams when the server stops and closes its database threads at the lifespan's end."""

    state: Served
    mcp: Any = None  # the MCP mount (`mcp_mount.McpMount`), when the mcp extra is installed
    operations: Operations  # the probes and the metrics (server/probes.py)

    def end_streams(self) -> None:
        """Every push follow ends now (the server begins to stop), and every stream whose client does not
        read ends within `streamed.STOP_GRACE` (uvicorn would cancel it, with a traceback)."""
        self.operations.drain()
        self.state.hub.close()
        for stream in list(self.state.streams):
            stream.stop()
        if self.mcp is not None:
            self.mcp.stop()

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


@asynccontextmanager
async def lifespan(app: App) -> AsyncIterator[None]:
    """Nothing to open at start-up (the engine was opened when the app was made) but the MCP session manager
    (a mounted app's lifespan does not run); everything closed at the end."""
    async with app.mcp.running() if app.mcp is not None else nullcontext():
        yield
    await app.shutdown()


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
    max_subscriptions: int = mcp_mount.MAX_SUBSCRIPTIONS,
    subscription_send_seconds: float | None = None,
    deadlines: Deadlines | None = None,
    limits: Limits | None = None,
    observed: bool = True,
    log_format: str = "text",
    metrics_on_loopback: bool = False,
) -> App:
    """The app serving docs/server.md over an engine: the embedded store file at `store_path`, the PostgreSQL
    `database` (initialized when empty; an older schema migrated only with `migrate`; `pooled`: behind a
    transaction pooler, see `PgStore`), or what `opener` opens;
    each request's access line goes to `access`; push follows send a heartbeat after `heartbeat_seconds` of
    silence, `max_follows` of them open at once; `/mcp`'s feed subscriptions at most `max_subscriptions` at once, a
    listener cut when a notification waits `subscription_send_seconds` (`subscriptions.SEND_SECONDS` unless given); `deadlines` watches its bodies' deadlines (the server's one
    timer, shared with the connections' header deadlines by `mnemo serve`); `limits`: the request rates
    (`ratelimit.PER_KEY` and `PER_ADDRESS` unless given); `observed`: request ids and
    metrics (off only for the benchmark's anchor); `log_format` `text` or `json` (server/logs.py);
    `metrics_on_loopback`: `/metrics` answers a loopback client without a key."""
    if opener is None and database is not None:
        from mnemo_tui.engine.postgres.store import PgStore

        # One connection pool per process, shared by the workers' engines and the health probe's.
        opener = partial(PgStore, database, migrate_schema=migrate, pool_size=workers + 1, pooled=pooled)
    if opener is None:
        assert store_path is not None
        store = Path(store_path)
        Store(store).close()  # created (and migrated) here, once; every later connection needs it to exist
        opener = partial(Store, store, create=False)
    pool = EnginePool(opener, workers=workers, limit=request_seconds)
    served = Served(
        pool,
        EnginePool(opener, workers=1, limit=HEALTH_SECONDS, on_loop=False),
        dumps(document()),
        wake.hub(pool, database, pooled, heartbeat_seconds),
        Bounds(max_follows),
    )

    def api(work: Work, method: str) -> Handler:
        """The endpoint of a route function, with the policies above: where it runs, whether it wakes the follows."""
        at_once = READ if work in BOUNDED_READS else WRITE if work in BOUNDED_WRITES else None
        wakes = method in ("POST", "DELETE") and work not in READS_BY_POST
        return endpoint(work, served, body=method == "POST", at_once=at_once, wakes=wakes)

    def at(where: str, **methods: Handler) -> Route:
        return Route(where, Methods(methods))

    health = probe(served)
    operations = Operations(served, Metrics(), metrics_on_loopback=metrics_on_loopback)
    served.pool.observe_wait = operations.metrics.db_wait.observe
    # The route table. Starlette tries the routes in order: the two hot paths first, and a literal path
    # before the parameters of its length (`/memory/rooms/join` is never a `{room_id}`). A parameter is one
    # whole segment (`segment`); `/memory/recent/` is an unknown path (no redirects).
    table = [
        at(PREFIX + "/memory/recent", POST=recent_endpoint(served, api(routes.recent, "POST"))),
        at(PREFIX + "/memory/write", POST=api(routes.write, "POST")),
        at(PREFIX + "/health", GET=health),
        at(PREFIX + "/ready", GET=health),
        at(PREFIX + "/health/ready", GET=readiness(served)),
        at("/openapi.json", GET=openapi(served)),
        at(PREFIX + "/memory/follow", POST=follow.handler(served)),
        at(PREFIX + "/memory/read", POST=api(search_routes.read, "POST")),
        at(PREFIX + "/memory/read-batch", POST=api(search_routes.read_batch, "POST")),
        at(PREFIX + "/memory/query", POST=api(search_routes.query, "POST")),
        at(PREFIX + "/memory/rooms", GET=api(routes.rooms_list, "GET"), POST=api(routes.rooms_create, "POST")),
        at(PREFIX + "/memory/rooms/join", POST=api(routes.rooms_join, "POST")),
        at(
            PREFIX + "/memory/rooms/{room_id:segment}/invites",
            GET=api(plane_routes.rooms_invites, "GET"),
            POST=api(routes.rooms_invite, "POST"),
        ),
        at(PREFIX + "/memory/rooms/{room_id:segment}", DELETE=api(routes.rooms_delete, "DELETE")),
        at(PREFIX + "/vault/secrets", GET=api(routes.vault_list, "GET"), POST=api(routes.vault_add, "POST")),
        at(PREFIX + "/vault/secrets/by-alias/{alias:segment}", GET=api(routes.vault_sealed, "GET")),
        at(PREFIX + "/memory/atoms/by-external-ref", POST=api(plane_routes.atom_by_external_ref, "POST")),
        at(
            PREFIX + "/memory/atoms/{atom_id:segment}",
            GET=api(routes.atom_get, "GET"),
            DELETE=api(routes.atom_delete, "DELETE"),
        ),
        at(PREFIX + "/memory/atoms/{atom_id:segment}/chain", GET=api(plane_routes.atom_chain, "GET")),
        at(PREFIX + "/memory/domains", GET=api(routes.domains, "GET")),
        at(PREFIX + "/memory/stats", GET=api(plane_routes.stats, "GET")),
        at(PREFIX + "/memory/feedback", POST=api(plane_routes.feedback, "POST")),
        at(PREFIX + "/memory/write-batch", POST=api(plane_routes.write_batch, "POST")),
        at(PREFIX + "/memory/write_batch", POST=api(plane_routes.write_batch, "POST")),
        at(PREFIX + "/memory/graph", POST=api(plane_routes.graph, "POST")),
        at(PREFIX + "/memory/consolidate", POST=api(plane_routes.consolidate, "POST")),
        at(PREFIX + "/memory/export", GET=api(plane_routes.export, "GET")),
        at(PREFIX + "/memory/removals", POST=api(removals_route.removals, "POST")),
        at(PREFIX + "/memory/domain/{domain:segment}", DELETE=api(plane_routes.domain_delete, "DELETE")),
        at(PREFIX + whoami_route.PATH, GET=whoami_route.handler(served)),
        at(PREFIX + consumers.PATH, GET=api(consumers.listing, "GET")),
        at(
            PREFIX + consumers.ONE,
            GET=api(consumers.show, "GET"),
            POST=api(consumers.commit, "POST"),
            DELETE=api(consumers.delete, "DELETE"),
        ),
        at(PREFIX + "/memory/reset", DELETE=api(plane_routes.reset if allow_reset else reset_refused, "DELETE")),
        at("/livez", GET=livez(operations)),
        at("/readyz", GET=readyz(operations)),
        at("/metrics", GET=metrics_endpoint(operations)),
    ]
    # Outermost first; Starlette adds its own error middleware outside them and its exception middleware
    # (the handlers below) inside them, next to the routes.
    keys = Keys(served.principal, PREFIX, PUBLIC, Limits() if limits is None else limits)
    middleware = [
        Middleware(
            AccessLog,
            write=access,
            metrics=operations.metrics if observed else None,
            json_line=json_access_line(served) if log_format == "json" else None,
        ),
        Middleware(Envelope),
        Middleware(
            AuthenticationMiddleware,
            backend=keys,
            on_error=key_refusal,
        ),
        Middleware(
            BodyLimits,
            max_body=MAX_BODY,
            seconds=BODY_SECONDS,
            in_flight=BODIES_IN_FLIGHT,
            deadlines=Deadlines() if deadlines is None else deadlines,
        ),
        Middleware(RawPath),
    ]
    mcp = mcp_mount.mounted(
        served, keys, MAX_BODY, max_subscriptions, subscription_send_seconds
    )  # /mcp (docs/mcp.md, "Over HTTP"); None without the mcp extra
    if mcp is not None:
        table.append(Route(mcp_mount.PATH, mcp))
        if observed:
            mcp.counted = operations.metrics.stream
            operations.metrics.feeds = mcp.feeds
    app = App(
        routes=table,
        middleware=middleware,
        exception_handlers={MnemoError: refused, HTTPException: unrouted},
        lifespan=lifespan,
    )
    app.state = served
    app.mcp = mcp
    app.operations = operations
    app.router.redirect_slashes = False  # a trailing slash is an unknown path (404), never a redirect
    return app
