"""Provides `Streamed`: an answer sent as it is made (the push follow's events, the streamed walk's lines),
each part bounded in time, ended for every stream when the server stops."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

Write = Callable[[bytes], Awaitable[None]]
WRITE_DEADLINE = 30.0  # seconds a streamed part may wait for a client that stopped reading, then the stream ends
STOP_GRACE = 1.0  # seconds each part may still take once the server stops (uvicorn's graceful wait is 5)
# A part goes to the server in sends of at most this: the transport copies what the socket does not take, so
# a stalled client then holds the part and at most a piece beside it, not the part twice (issue 50).
PIECE = 64 << 10


class Stalled(Exception):
    """A streamed part was not taken in time (the client stopped reading, or the server stops): the stream
    ends, its connection is dropped."""


class Streamed(Response):
    """An answer sent as it is made (`more_body`), without a length: `produce(write)` writes its parts, each
    sent at once (the server's own flow control holds `write` while the client reads slowly), and the
    answer ends when `produce` returns or raises; `done` runs after, whatever happened. A part longer than
    `piece` is sent in pieces of it.

    While it runs it is in `streams` (the app's), so that a server that stops can end it (`stop`).
    """

    def __init__(
        self,
        produce: Callable[[Write], Awaitable[None]],
        media_type: str,
        headers: dict[str, str],
        streams: set[Streamed],
        done: Callable[[], None] | None = None,
        piece: int = PIECE,
    ) -> None:
        # As Starlette's StreamingResponse: no body, so no Content-Length among the headers.
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)
        self.produce = produce
        self.done = done
        self.piece = piece  # the most one send hands uvicorn (`PIECE` unless the stream's own)
        self.streams = streams
        self._deadline: asyncio.Timeout | None = None
        self._until: float | None = None
        self.stalled = False  # ended unfinished: its connection was dropped

    def stop(self) -> None:
        """The server stops: a part still waiting for its client after `STOP_GRACE` ends the stream."""
        self._until = asyncio.get_running_loop().time() + STOP_GRACE
        if self._deadline is not None and (self._deadline.when() or self._until + 1) > self._until:
            self._deadline.reschedule(self._until)

    async def _part(self, send: Send, message: Message) -> None:
        when = asyncio.get_running_loop().time() + WRITE_DEADLINE
        if self._until is not None:
            when = min(when, self._until)
        try:
            async with asyncio.timeout_at(when) as self._deadline:
                await send(message)
        except TimeoutError:
            raise Stalled from None
        finally:
            self._deadline = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.streams.add(self)
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})

            async def write(part: bytes) -> None:
                size = self.piece
                for start in range(0, len(part), size):
                    piece = part[start : start + size] if len(part) > size else part
                    await self._part(send, {"type": "http.response.body", "body": piece, "more_body": True})

            await self.produce(write)
            await self._part(send, {"type": "http.response.body", "body": b"", "more_body": False})
        except Stalled:
            # Unfinished, and its buffer is the stalled client's: the connection is dropped, not closed.
            self.stalled = True
            abort = scope.get("mnemo.abort")
            if abort is not None:
                abort()
                await asyncio.sleep(0)  # its connection_lost runs: uvicorn sees a client gone, not an unfinished answer
        finally:
            self.streams.discard(self)
            if self.done is not None:
                self.done()
