"""Provides the operations endpoints at the server's origin (docs/server.md, "Operating it"): `GET /livez` and
`GET /readyz` (the Kubernetes meanings, no key) and `GET /metrics` (Prometheus text, any active key)."""

from __future__ import annotations

import asyncio
import ipaddress
from contextlib import suppress
from typing import TYPE_CHECKING

from starlette.responses import Response

from mnemo_tui.server import auth
from mnemo_tui.server.metrics import CONTENT_TYPE, Metrics
from mnemo_tui.server.middleware import Caller

if TYPE_CHECKING:
    from starlette.requests import Request

    from mnemo_tui.server.endpoints import Handler, Served

# The readiness probe's own wait for the database: below the 5 s within which a lost database must show,
# and below the pool's wait for a connection (`engine/postgres/pools.py`), so a probe never queues behind one.
READY_WAIT = 2.0
TEXT = "text/plain; charset=utf-8"


class Operations:
    """What the probes and the metrics of one app share: its metrics, whether it is draining (the server has
    begun to stop), and the one database ping in flight (a probe joins it rather than queue another)."""

    def __init__(self, served: Served, metrics: Metrics, *, metrics_on_loopback: bool = False) -> None:
        self.served = served
        self.metrics = metrics
        self.metrics_on_loopback = metrics_on_loopback
        self.draining = False
        self._ping: asyncio.Future[None] | None = None
        metrics.served = served

    def drain(self) -> None:
        """The server begins to stop: not ready from now on (alive until it exits)."""
        self.draining = True

    async def database(self) -> str | None:
        """None when the store answers within `READY_WAIT`, else why not (no detail of the store's error)."""
        if self._ping is None or self._ping.done():
            self._ping = asyncio.ensure_future(self.served.health.run(lambda engine: engine.ping()))
            self._ping.add_done_callback(_retrieved)
        try:
            await asyncio.wait_for(asyncio.shield(self._ping), READY_WAIT)
        except TimeoutError:
            return f"no answer within {READY_WAIT:g} s"
        except Exception:  # noqa: BLE001 - any failure is "not ready"; the store's words stay in the server's log
            return "unavailable"
        return None


def _retrieved(future: asyncio.Future[None]) -> None:
    # A ping nobody waited for to the end (its probe gave up): its failure is not an unhandled one.
    if not future.cancelled():
        future.exception()


def _report(checks: list[tuple[str, str | None]], name: str, verbose: bool) -> Response:
    """Kubernetes' shape: `ok`, or with `?verbose` (and always on failure) a line a check and a verdict."""
    failed = any(reason is not None for _, reason in checks)
    if not failed and not verbose:
        return Response(b"ok", media_type=TEXT)
    lines = [f"[+]{check} ok" if reason is None else f"[-]{check} failed: {reason}" for check, reason in checks]
    lines.append(f"{name} check {'failed' if failed else 'passed'}")
    return Response("\n".join(lines) + "\n", status_code=503 if failed else 200, media_type=TEXT)


def livez(ops: Operations) -> Handler:
    """`GET /livez`: 200 while the event loop answers, draining or not (restarting a server that cannot reach
    its database would not bring the database back)."""

    async def live(request: Request) -> Response:
        return _report([("ping", None)], "livez", "verbose" in request.query_params)

    return live


def readyz(ops: Operations) -> Handler:
    """`GET /readyz`: 503 while the server drains (at once on SIGTERM) or its store does not answer within
    `READY_WAIT`; 200 again as soon as it does."""

    async def ready(request: Request) -> Response:
        draining = "the server is stopping" if ops.draining else None
        database = None if draining else await ops.database()
        checks = [("ping", None), ("shutdown", draining), ("database", database)]
        return _report(checks, "readyz", "verbose" in request.query_params)

    return ready


def is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    with suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def metrics_endpoint(ops: Operations) -> Handler:
    """`GET /metrics`: the Prometheus text of this server; any active key (the envelope's 401 otherwise), or none
    from a loopback client when the server was started with `--metrics-on-loopback`."""

    async def scrape(request: Request) -> Response:
        client = request.client
        if not (ops.metrics_on_loopback and is_loopback(client.host if client else None)):
            key = auth.presented_key(request)
            # Checked as the middleware checks an /api/v1 key; the access line then names its principal.
            request.scope["user"] = Caller(await ops.served.principal(key), key)
        return Response(ops.metrics.render(), media_type=CONTENT_TYPE)

    return scrape
