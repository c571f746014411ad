"""Provides the streamed walk: `POST /memory/recent` with `Accept: application/x-ndjson` answers the whole walk,
one line a page exactly as the JSON answer's page, the server following its own cursors (docs/server.md)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from functools import partial

from mnemo_tui.engine.interface import Engine
from mnemo_tui.limits import STREAM_PAGE
from mnemo_tui.model import RecentQuery, WirePage
from mnemo_tui.server.asgi import Receive, StreamingResponse
from mnemo_tui.server.envelope import CANONICAL
from mnemo_tui.server.pool import EnginePool
from mnemo_tui.server.routes import page_json

NDJSON = "application/x-ndjson"
log = logging.getLogger("mnemo.server")


def wanted(accept: str | None) -> bool:
    """Whether an `Accept` header asks for the stream: `application/x-ndjson` listed, and not with `q=0`."""
    if accept is None or NDJSON not in accept:
        return False
    for item in accept.split(","):
        kind, *params = item.split(";")
        if kind.strip().lower() != NDJSON:
            continue
        for param in params:
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


def page(engine: Engine, who: str, query: RecentQuery) -> WirePage:
    """One line's page: `STREAM_PAGE` entries from the query's cursor (its limit checked, not used)."""
    return engine.recent_wire(who, query, STREAM_PAGE)


async def _lines(pool: EnginePool, who: str, query: RecentQuery, first: WirePage) -> AsyncIterator[bytes]:
    """Each page as a line, the next one read (in a database thread, one call a page) only once the
    previous line was handed to the server. A page that fails ends the stream without its last line
    (`"next_cursor":null`), which tells the client to ask again from the last cursor it got; that
    request then gets the failure's own answer (a 503 while the server stops, a 403...)."""
    current = first
    while True:
        yield page_json(current) + b"\n"
        if current.next_cursor is None:
            return
        try:
            current = await pool.run(partial(page, who=who, query=query.replace(cursor=current.next_cursor)))
        except Exception as exc:  # noqa: BLE001 - the client re-asks; the log says why
            log.warning("streamed walk cut short: %s", getattr(exc, "message", None) or type(exc).__name__)
            return


def answer(pool: EnginePool, who: str, query: RecentQuery, first: WirePage, receive: Receive) -> StreamingResponse:
    """The NDJSON answer of a walk whose first page is read (its failures were a JSON refusal, status and all)."""
    headers = {**CANONICAL, "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(_lines(pool, who, query, first), receive, media_type=NDJSON, headers=headers)
