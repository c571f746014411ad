"""Provides the server's HTTP layer over ASGI: the request, the answer, the routing table and the app's lifespan.

What `mnemo serve` needs of a web framework and no more: uvicorn speaks HTTP, this maps a method and
a path to an endpoint, and every request costs a dictionary look-up (docs/server.md, "The HTTP layer").
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any
from urllib.parse import unquote_to_bytes

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON = "application/json"


class ClientDisconnect(Exception):
    """The client went away before its request body arrived whole."""


class Request:
    """One HTTP request: its method, path, headers (lower-case names, the first of a repeated one wins),
    the parameters its route took from the path, and the ASGI scope and receive channel."""

    __slots__ = ("headers", "method", "params", "path", "receive", "scope")

    def __init__(self, scope: Scope, receive: Receive, params: dict[str, str] | None = None) -> None:
        self.scope = scope
        self.receive = receive
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.params = params or {}
        # ASGI servers give header names in lower case; latin-1 is HTTP's own reading of header bytes.
        self.headers: dict[str, str] = {k.decode("latin-1"): v.decode("latin-1") for k, v in reversed(scope["headers"])}

    async def body_part(self) -> tuple[bytes, bool]:
        """The next part of the body as it arrives (maybe empty), and whether more of it follows.

        A coroutine called once a part, not an async generator: the event loop tracks every async
        generator it starts (a weak set, and a finalizer), which a request has no use for.

        Raises:
            ClientDisconnect: the client went away first.
        """
        message = await self.receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        return message.get("body", b""), bool(message.get("more_body", False))


class Response:
    """One whole answer: status, body and headers (`Content-Type` and `Content-Length` are added)."""

    __slots__ = ("body", "headers", "media_type", "status")

    def __init__(
        self, body: bytes, status: int = 200, media_type: str = JSON, headers: dict[str, str] | None = None
    ) -> None:
        self.body = body
        self.status = status
        self.media_type = media_type
        self.headers = headers if headers is not None else {}

    async def send(self, send: Send) -> None:
        raw = [(b"content-length", str(len(self.body)).encode()), _content_type(self.media_type)]
        if self.headers:
            raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        await send({"type": "http.response.start", "status": self.status, "headers": raw})
        await send({"type": "http.response.body", "body": self.body})


Write = Callable[[bytes], Awaitable[None]]
WRITE_DEADLINE = 30.0  # seconds a streamed part may wait for a client that stopped reading, then the stream ends
STOP_GRACE = 1.0  # seconds each part may still take once the server stops (uvicorn's graceful wait is 5)


class Stalled(Exception):
    """A streamed part was not taken in time (the client stopped reading, or the server stops): the stream
    ends, its connection is closed."""


class Streamed(Response):
    """An answer sent as it is made (`more_body`), without a length: `produce(write)` writes its parts, each
    sent at once (the server's own flow control holds `write` while the client reads slowly), and the
    answer ends when `produce` returns or raises; `done` runs after, whatever happened."""

    __slots__ = ("_deadline", "_until", "done", "produce", "stalled")

    def __init__(
        self,
        produce: Callable[[Write], Awaitable[None]],
        media_type: str,
        headers: dict[str, str] | None = None,
        done: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(b"", 200, media_type, headers)
        self.produce = produce
        self.done = done
        self._deadline: asyncio.Timeout | None = None
        self._until: float | None = None
        self.stalled = False  # ended unfinished: its connection is to be dropped

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

    async def send(self, send: Send) -> None:
        try:
            raw = [_content_type(self.media_type)]
            raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
            await send({"type": "http.response.start", "status": self.status, "headers": raw})

            async def write(part: bytes) -> None:
                await self._part(send, {"type": "http.response.body", "body": part, "more_body": True})

            await self.produce(write)
            await self._part(send, {"type": "http.response.body", "body": b"", "more_body": False})
        except Stalled:
            self.stalled = True  # unfinished: the app drops the connection (its buffer is the stalled client's)
        finally:
            if self.done is not None:
                self.done()


@lru_cache(maxsize=16)
def _content_type(media: str) -> tuple[bytes, bytes]:
    if media.startswith("text/") and "charset" not in media:
        media += "; charset=utf-8"
    return b"content-type", media.encode("latin-1")


Handler = Callable[[Request], Awaitable[Response]]
_PARAM = re.compile(r"{([a-z_]+)}\Z")
Segments = tuple[str, ...]


def path_segments(scope: Scope) -> Segments | None:
    """The request path's segments, each percent-decoded once from the raw path, so that `%2F` stays inside
    its segment (`/memory/domain/team%2Falpha` names the domain `team/alpha`); None when a segment is not
    UTF-8. A server that gives no raw path leaves only the decoded one to split."""
    raw = scope.get("raw_path")
    if raw is None:
        return tuple(scope["path"].split("/"))
    try:
        return tuple(unquote_to_bytes(part).decode() for part in raw.partition(b"?")[0].split(b"/"))
    except UnicodeDecodeError:
        return None


class Route:
    """A path (with `{name}` parts standing for one whole path segment each) and the methods it answers; GET answers HEAD."""

    __slots__ = ("handlers", "names", "path", "segments")

    def __init__(self, path: str, handlers: dict[str, Handler]) -> None:
        self.path = path
        self.handlers = dict(handlers)
        if "GET" in self.handlers:
            self.handlers.setdefault("HEAD", self.handlers["GET"])
        self.segments = tuple(path.split("/"))
        # Each segment's parameter name, or None for a literal segment.
        self.names = tuple(found[1] if (found := _PARAM.match(part)) else None for part in self.segments)

    @property
    def literal(self) -> bool:
        return not any(self.names)

    def match(self, segments: Segments) -> dict[str, str] | None:
        if len(segments) != len(self.segments):
            return None
        params = {}
        for mine, theirs, name in zip(self.segments, segments, self.names, strict=True):
            if name is None:
                if mine != theirs:
                    return None
            elif not theirs:  # a parameter is never empty
                return None
            else:
                params[name] = theirs
        return params


class Router:
    """A literal path is its route's alone (`/memory/rooms/join` is never a `{room_id}`); any other path is
    the first route with parameters whose path and method match. A path that no route has is
    `Missing(None)`; a path some route has, asked with a method none of them answers, `Missing(allow)`.

    A literal path asked with a method it answers (every hot request) is one dictionary look-up.
    """

    def __init__(self, routes: list[Route]) -> None:
        self.routes = [route for route in routes if not route.literal]
        self._literal: dict[Segments, Route] = {route.segments: route for route in reversed(routes) if route.literal}
        self._direct: dict[tuple[str, str], Handler] = {
            (method, route.path): handler
            for route in self._literal.values()
            for method, handler in route.handlers.items()
        }

    def find(self, method: str, scope: Scope) -> tuple[Handler, dict[str, str]] | Missing:
        """The handler of a request (by its ASGI scope) and the parameters its path gave."""
        raw = scope.get("raw_path")
        if raw is not None and b"%" not in raw:  # nothing escaped: the decoded path is the raw one
            handler = self._direct.get((method, scope["path"]))
            if handler is not None:
                return handler, {}
        segments = path_segments(scope)
        if segments is None:
            return Missing(None)
        literal = self._literal.get(segments)
        if literal is not None:
            handler = literal.handlers.get(method)
            return (handler, {}) if handler is not None else Missing(set(literal.handlers))
        return self._scan(method, segments)

    def _scan(self, method: str, segments: Segments) -> tuple[Handler, dict[str, str]] | Missing:
        allow: set[str] | None = None
        for route in self.routes:
            params = route.match(segments)
            if params is None:
                continue
            handler = route.handlers.get(method)
            if handler is not None:
                return handler, params
            allow = (allow or set()) | set(route.handlers)
        return Missing(allow)


class Missing:
    """No route answers: `allow` is None for an unknown path, else the methods its routes answer."""

    __slots__ = ("allow",)

    def __init__(self, allow: set[str] | None) -> None:
        self.allow = allow


async def lifespan(receive: Receive, send: Send, on_shutdown: Callable[[], Awaitable[None]]) -> None:
    """The ASGI lifespan protocol: nothing to do at start-up, `on_shutdown` awaited at the end."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await on_shutdown()
            except Exception as exc:  # noqa: BLE001 - said to the server, which logs it
                await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.shutdown.complete"})
            return
