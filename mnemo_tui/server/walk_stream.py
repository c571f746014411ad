"""Provides the streamed walk: `POST /memory/recent` with `Accept: application/x-ndjson` answers the whole walk,
one line a page exactly as the JSON answer's page, the server following its own cursors (docs/server.md)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial

from starlette.types import Receive

from mnemo_tui.engine.feed import JoinedPage
from mnemo_tui.engine.interface import Engine
from mnemo_tui.server.bounds import PerKey
from mnemo_tui.server.envelope import CANONICAL
from mnemo_tui.server.pool import EnginePool
from mnemo_tui.server.routes import page_pieces
from mnemo_tui.server.streamed import Streamed, Write
from mnemo_tui.values.model import RecentQuery

NDJSON = "application/x-ndjson"
# Pages read in one database call (one read transaction, each page's text joined by the database) and sent
# as one part: a thread hop, a statement and a send per page were most of the server's cost of a walk. A part
# holds at most `PART_BYTES` of lines (entries' text and each line's framing, at most `LINE_FRAME`), so a walk
# holds about this much at once. 8 pages, not 16: each of the database threads a walk passes through keeps
# about a part's memory, and the hop a part costs little once a page is one value (issue 64).
PART_PAGES = 8
PART_BYTES = 1 << 20
LINE_FRAME = 256  # `{"items":[`, `],"next_cursor":`, a cursor (138 characters) quoted, `}`, the newline: 168
# The most one send of a walk hands uvicorn (`Streamed`'s piece): a part goes in four or so, where sends of
# 64 KiB (a follow's) were one a line and each cost h11 and a timer; a stalled walk holds its part and a piece.
PIECE = 256 << 10
# Streamed walks one key may have open at once, then 429 `TOO_MANY_WALKS` (docs/server.md says why 16).
MAX_WALKS_PER_KEY = 16
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


def bound(per_key: int | None = None) -> PerKey:
    """The count of each key's open streamed walks, at most `per_key` (`MAX_WALKS_PER_KEY` unless given)."""
    return PerKey(MAX_WALKS_PER_KEY if per_key is None else per_key, "TOO_MANY_WALKS", "streamed walks")


def first(engine: Engine, who: str, query: RecentQuery) -> list[JoinedPage]:
    """The walk's first page (of the query's `limit`, or shorter where `PART_BYTES` cut it), read before the
    answer starts so that its failures are a JSON refusal, and sent alone: the stream starts at once."""
    return engine.recent_wire_pages(who, query, 1, PART_BYTES - LINE_FRAME)


def pages(engine: Engine, who: str, query: RecentQuery) -> list[JoinedPage]:
    """The walk's next part from the query's cursor, one database call (`Engine.recent_wire_pages`): up to
    `PART_PAGES` pages of the query's `limit`, each a line exactly as the JSON answer's page would be (so a
    catch-up's checkpoints, one a page, come as often as they do page by page), and together at most
    `PART_BYTES` of lines; the bound may cut the part's last page short, which then still carries its cursor.
    """
    return engine.recent_wire_pages(who, query, PART_PAGES, PART_BYTES - PART_PAGES * LINE_FRAME)


def sends(part: list[JoinedPage]) -> list[bytes]:
    """A part's lines (each a page exactly as the JSON answer's, and a newline) in sends of at most `PIECE`
    bytes, whole lines joined while they fit (a longer line goes alone, and `Streamed` cuts it): each byte
    copied once here, and no send of a few bytes."""
    out: list[bytes] = []
    pieces: list[bytes] = []
    size = 0
    for page in part:
        length = len(page.items) + LINE_FRAME
        if pieces and size + length > PIECE:
            out.append(b"".join(pieces))
            pieces, size = [], 0
        pieces += (*page_pieces(page.items, page.next_cursor), b"\n")
        size += length
    if pieces:
        out.append(b"".join(pieces))
    return out


async def _gone(receive: Receive) -> None:
    """Returns once the client went away (the request's body was read whole before)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def answer(
    pool: EnginePool,
    who: str,
    query: RecentQuery,
    first: list[JoinedPage],
    receive: Receive,
    streams: set[Streamed],
    done: Callable[[], None] | None = None,
    allowed: Callable[[], Awaitable[object]] | None = None,
) -> Streamed:
    """The NDJSON answer of a walk whose first page is read (`first`: its failures were a JSON refusal, status and all);
    `done` runs once it ended, however (finished, client gone, a failure, the server stopping: `Streamed`);
    `allowed` looks the key up again before each part is read.

    Each page is a line, sent with others in pieces (`sends`); the next part is read (in a database thread,
    one call, `pages`) only once the part before was handed over, so the server's flow control holds the walk back to the client's pace. A
    client gone stops it before its next part. A part that fails ends the stream without its last line
    (`"next_cursor":null`), which tells the client to ask again from the last cursor it got; that request
    then gets the failure's own answer (a 503 while the server stops, a 403...).
    """

    async def produce(write: Write) -> None:
        gone = asyncio.ensure_future(_gone(receive))
        try:
            current = first[:]
            first.clear()  # the stream's texts are `current`'s only, let go once encoded
            while True:
                part = sends(current)
                cursor = current[-1].next_cursor
                del current  # a stalled client holds the part's bytes only, not its texts as well
                while part:
                    await write(part.pop(0))  # each let go once sent
                if cursor is None or gone.done():
                    return
                try:
                    if allowed is not None:  # a key revoked meanwhile reads nothing more (the client gets its 401)
                        await allowed()
                    current = await pool.run(partial(pages, who=who, query=query.replace(cursor=cursor)))
                except Exception as exc:  # noqa: BLE001 - the client asks again; the log says why
                    log.warning("streamed walk cut short: %s", getattr(exc, "message", None) or type(exc).__name__)
                    return
        finally:
            gone.cancel()

    headers = {**CANONICAL, "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return Streamed(produce, NDJSON, headers, streams, done, PIECE)
