"""Provides the middleware of `mnemo serve` (outermost first): the access log, the error envelope as the last
word, the key (Starlette's `AuthenticationMiddleware` over `Keys`), the request body's bounds, and routing
on the raw path; and the exception handlers that turn a refusal into the envelope.

Each is a plain ASGI middleware (a call and, where it must, a wrapped `send` or `receive`): no task group
or memory stream per request.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, unquote_to_bytes

from starlette.authentication import AuthCredentials, AuthenticationBackend, AuthenticationError, BaseUser
from starlette.convertors import Convertor
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnemo_tui.errors import AuthError, MnemoError, PayloadTooLarge, Unavailable
from mnemo_tui.server import auth
from mnemo_tui.server.deadlines import Deadlines
from mnemo_tui.server.envelope import REQUEST_ID, Refused, error, request_id, sent_request_id, translate
from mnemo_tui.server.metrics import Metrics
from mnemo_tui.server.ratelimit import Limited, Limits

# -- the access log ---------------------------------------------------------------------------------


def loggable(text: str) -> str:
    """A field as the access log writes it: every control, quote, backslash and non-ASCII character
    escaped, so no request can write a line, or a field, of its own (`%0A` in a path arrives as a newline)."""
    if _plain(text):
        return text
    return text.encode("unicode_escape").decode("ascii").replace('"', "\\x22")


def _plain(text: str) -> bool:
    # Character by character: text made of plain pieces is plain, and the other way round.
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def access_line(scope: Scope, status: int, started: float, rid: str | None = None) -> str:
    """A request's access-log line: client, method, path (keys redacted), status, time, principal, and its
    request id when it has one. Never a header."""
    client = scope.get("client") or ("-", 0)
    host, method, path = str(client[0]), scope["method"], scope["path"]
    if "mk_" in path:
        path = auth.redact(path)
    user = scope.get("user")
    principal = user.principal if isinstance(user, Caller) else "-"
    if not _plain(host + method + path + principal):  # one check for the four fields (all of them, nearly always)
        host, method, path, principal = loggable(host), loggable(method), loggable(path), loggable(principal)
    # The id is visible ASCII already (`new_request_id`).
    return '%s:%s "%s %s" %s %.1fms principal=%s%s%s' % (  # noqa: UP031 - the cheapest formatting there is
        host,
        client[1],
        method,
        path,
        status,
        (time.perf_counter() - started) * 1000,
        principal,
        "" if rid is None else " rid=",
        "" if rid is None else rid,
    )


def new_request_id(scope: Scope) -> str:
    """The request's id: the caller's `X-Request-Id` when it is at most 128 visible ASCII characters, else a new
    one (16 random hex digits: an id is a token to search for, not a secret, so the process's own generator
    makes it, without a system call a request)."""
    sent = auth.header(scope, b"x-request-id")
    kept = None if sent is None else sent_request_id(sent)
    return "%016x" % random.getrandbits(64) if kept is None else kept  # noqa: UP031 - the cheapest; not a secret


class AccessLog:
    """One line a request (`access_line`, or `json_line` when given), written once its answer ended, a stream's
    at its end. With `metrics` (`mnemo serve` always) each request also gets its id (kept in its scope, sent
    back as `X-Request-Id` on every answer, written in its line) and is counted; without, neither (the
    benchmark's anchor, docs/performance.md "The server under `wrk`")."""

    def __init__(
        self,
        app: ASGIApp,
        write: Callable[[str], None],
        metrics: Metrics | None = None,
        json_line: Callable[[Scope, int, float, str, str, int, int], Awaitable[str]] | None = None,
    ) -> None:
        self.app = app
        self.write = write
        self.metrics = metrics
        self.json_line = json_line

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.metrics is None:
            await self._plain(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        sent = 0
        rid = scope[REQUEST_ID] = new_request_id(scope)
        rid_header = (b"x-request-id", rid.encode())

        async def logged(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = message.get("headers") or []
                # Only the envelope (`envelope.error`, a status of 400 or more) names the id already.
                if status < 400 or not any(name.lower() == b"x-request-id" for name, _ in headers):
                    message["headers"] = [*headers, rid_header]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, logged)
        finally:
            received = scope.get(RECEIVED, 0)  # the body's bytes, counted as they arrived (`BodyLimits`)
            seconds = time.perf_counter() - started
            path = getattr(scope.get("route"), "path", None)  # the route that answered, if one did
            self.metrics.request(scope["method"], path, status, seconds, received, sent)
            if self.json_line is None:
                self.write(access_line(scope, status, started, rid))
            else:
                route = self.metrics.route_of(scope)
                self.write(await self.json_line(scope, status, started, rid, route, received, sent))

    async def _plain(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500

        async def logged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, logged)
        finally:
            self.write(access_line(scope, status, started))


# -- the error envelope -----------------------------------------------------------------------------


class Envelope:
    """The last word: a failure nothing else answered is the envelope (500 `INTERNAL` for a bug, logged with
    its traceback), never uvicorn's bare 500; once an answer has begun nothing more can be said."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        begun = False

        async def sending(message: Message) -> None:
            nonlocal begun
            begun = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if begun:
                raise
            await error(translate(exc), request_id(HTTPConnection(scope)))(scope, receive, send)


async def refused(request: Request, exc: Exception) -> Response:
    """The exception handler of every refusal an endpoint raises (`MnemoError`): its envelope."""
    assert isinstance(exc, MnemoError)
    return error(translate(exc), request_id(request))


async def unrouted(request: Request, exc: Exception) -> Response:
    """The exception handler of Starlette's routing refusals: 404 for an unknown path, 405 (with `Allow`, every
    method of the path) for a method its path does not answer."""
    assert isinstance(exc, HTTPException)
    rid, method = request_id(request), request.method
    path = request.scope.get("mnemo.path", request.scope["path"])  # as the client sent it (`RawPath`)
    if exc.status_code == 405:
        allow = ", ".join(sorted(m.strip() for m in (exc.headers or {}).get("Allow", "").split(",") if m.strip()))
        return error(Refused(405, "METHOD_NOT_ALLOWED", f"{method} is not allowed on {path}"), rid, {"Allow": allow})
    if exc.status_code == 404:
        return error(Refused(404, "NOT_FOUND", f"no such endpoint: {method} {path}"), rid)
    return error(Refused(exc.status_code, "HTTP_ERROR", str(exc.detail)), rid)


# -- the key ----------------------------------------------------------------------------------------


class Caller(BaseUser):
    """The key's principal, and the key (the streams count theirs by key, and a follow looks it up again)."""

    __slots__ = ("key", "principal")

    def __init__(self, principal: str, key: str) -> None:
        self.principal = principal
        self.key = key

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.principal


def caller(request: HTTPConnection) -> Caller:
    """Who sent the request: set by `Keys` before it was routed."""
    user = request.scope.get("user")
    assert isinstance(user, Caller)
    return user


class KeyRefused(AuthenticationError):
    """The key is missing, malformed, unknown or revoked, or the store could not say (`error`)."""

    def __init__(self, refusal: MnemoError) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


_KEYED = AuthCredentials(["key"])


class Keys(AuthenticationBackend):
    """The key of every request to an `/api/v1` path (known or not) but the public ones, checked before the
    request is routed and before a byte of its body is read: a bad key is 401 there, never a 404 or 405.
    A valid key counts against its rate, a request without one against its address's (`limits`): past
    either, 429."""

    def __init__(
        self, principal: Callable[[str], Awaitable[str]], prefix: str, public: frozenset[str], limits: Limits
    ) -> None:
        self.principal = principal
        self.prefix = prefix
        self.public = public
        self.limits = limits

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        path = conn.scope["path"]
        if path in self.public or not path.startswith(self.prefix):
            return None
        try:
            key = auth.presented_key(conn)
            who = await self.principal(key)
        except AuthError as exc:  # no valid key: the address pays for it
            client = conn.scope.get("client")
            try:
                self.limits.address(str(client[0]) if client else "-")
            except MnemoError as limited:
                raise KeyRefused(limited) from None
            raise KeyRefused(exc) from None
        except Exception as exc:  # noqa: BLE001 - the lookup's failure is the request's answer
            raise KeyRefused(translate(exc)) from None
        try:
            self.limits.key(key)
        except MnemoError as limited:
            raise KeyRefused(limited) from None
        return _KEYED, Caller(who, key)


def key_refusal(conn: HTTPConnection, exc: AuthenticationError) -> Response:
    """`AuthenticationMiddleware`'s answer to a refused key: the envelope (401; 429 past a rate, with its
    `Retry-After`; 503 when the store could not say)."""
    refusal = exc.refusal if isinstance(exc, KeyRefused) else Refused(401, "UNAUTHORIZED", str(exc))
    wait = {"Retry-After": str(refusal.retry_after)} if isinstance(refusal, Limited) else None
    return error(refusal, request_id(conn), wait)


# -- the request body -------------------------------------------------------------------------------


class BodyBudget:
    """The bytes of request bodies being received at once, over every connection, bounded."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> None:
        if self.used + size > self.limit:
            raise Unavailable("the server is receiving too many request bodies at once; retry shortly")
        self.used += size

    def give(self, size: int) -> None:
        self.used -= size


class BodyLimits:
    """A request body's bounds, kept as the endpoint reads it (so an endpoint that reads none, or an unknown
    path, never waits for one): over `max_body` bytes 413, by its `Content-Length` before a byte is read;
    not whole within `seconds` of the first read 408; past the budget of bodies in flight 503."""

    def __init__(self, app: ASGIApp, *, max_body: int, seconds: float, in_flight: int, deadlines: Deadlines) -> None:
        self.app = app
        self.max_body = max_body
        self.seconds = seconds
        self.budget = BodyBudget(in_flight)
        self.deadlines = deadlines

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = _Body(self, scope, receive)
        try:
            await self.app(scope, body.receive, send)
        finally:
            if not body.whole:
                body.end()
            # The count, not the body: the body holds uvicorn's `receive`, whose cycle holds the scope, and a
            # cycle a request (~20 objects) was left for the collector to find.
            scope[RECEIVED] = body.size


RECEIVED = "mnemo.received"  # the bytes of a request's body received, in its scope once it was answered


class _Body:
    """One request's body as it arrives, through `receive`, and its bytes received so far (`size`); after its
    last part `receive` is the server's own (a stream watches it for the client's disconnect)."""

    __slots__ = ("_receive", "cut", "headers", "held", "limits", "size", "started", "task", "whole")

    def __init__(self, limits: BodyLimits, scope: Scope, receive: Receive) -> None:
        self.limits = limits
        self.headers = scope["headers"]  # not the scope: no cycle (`BodyLimits`)
        self._receive = receive
        self.size = self.held = 0
        self.started = self.whole = self.cut = False
        self.task: asyncio.Task[Any] | None = None

    def _too_large(self) -> PayloadTooLarge:
        limit = self.limits.max_body
        return PayloadTooLarge(f"request body is over {limit} bytes", details={"limit": limit})

    def _start(self) -> None:
        self.started = True
        for name, value in self.headers:
            if name == b"content-length":
                if value.isdigit() and int(value) > self.limits.max_body:
                    raise self._too_large()
                break
        self.task = asyncio.current_task()
        self.limits.deadlines.expect(self, self.limits.seconds, self._late)

    def _late(self) -> None:
        # The task waits in `receive` (nothing else is awaited while a body arrives): the cancel ends that wait.
        if self.task is not None:
            self.cut = True
            self.task.cancel()

    async def receive(self) -> Message:
        if self.whole:
            return await self._receive()
        if not self.started:
            self._start()
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            if not self.cut or self.task is None:
                raise
            self.cut = False
            self.task.uncancel()
            self.end()
            seconds = f"{self.limits.seconds:g}"
            raise Refused(408, "REQUEST_TIMEOUT", f"the request body did not arrive within {seconds} s") from None
        if message["type"] != "http.request":
            self.end()
            return message
        chunk = message.get("body", b"")
        if chunk:
            self.size += len(chunk)
            if self.size > self.limits.max_body:
                self.end()
                raise self._too_large()
            self.limits.budget.take(len(chunk))
            self.held += len(chunk)
        if not message.get("more_body", False):
            self.end()
        return message

    def end(self) -> None:
        """The body is whole, refused, or the request is over: its bytes leave the budget, its deadline goes."""
        if self.started:
            self.limits.deadlines.drop(self)
        self.limits.budget.give(self.held)
        self.held = 0
        self.whole = True


async def read_body(request: Request) -> bytes:
    """The request body, whole (its bounds kept by `BodyLimits` as it arrives).

    A coroutine over `receive` rather than Starlette's `Request.body()`, whose async generator the event
    loop tracks one by one (a weak set and a finalizer a request), which a request has no use for.

    Raises:
        ClientDisconnect: the client went away first.
    """
    chunks: list[bytes] = []
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


# -- routing on the raw path ------------------------------------------------------------------------


class Segment(Convertor[str]):
    """A path parameter: one whole segment of the raw path, percent-decoded once (`RawPath` keeps a `/` or `%`
    it decoded escaped, so that `team%2Falpha` stays one segment)."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value) if "%" in value else value

    def to_string(self, value: str) -> str:
        return value.replace("%", "%25").replace("/", "%2F")


class RawPath:
    """Routes a request on its raw path, each segment percent-decoded once: uvicorn's decoded path would
    split `team%2Falpha` in two and route `/memory%2Frecent` as `/memory/recent`. A path with no escape (every
    hot request) is routed as it is; a segment that is not UTF-8 names no endpoint (404)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        # `find`, not `in`: `bytes in bytes` first tries its operand as an int, building a TypeError (~2k instructions).
        if raw is None or raw.find(b"%") < 0 or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            parts = [unquote_to_bytes(part).decode() for part in raw.partition(b"?")[0].split(b"/")]
        except UnicodeDecodeError:
            shown = f"no such endpoint: {scope['method']} {scope['path']}"
            await error(Refused(404, "NOT_FOUND", shown), request_id(HTTPConnection(scope)))(scope, receive, send)
            return
        routed = "/".join(Segment().to_string(part) for part in parts)
        # A copy: the access log and the messages keep the path the client sent, as uvicorn decoded it.
        inner = {**scope, "path": routed, "mnemo.path": scope["path"]}
        try:
            await self.app(inner, receive, send)
        finally:
            if "route" in inner:  # the route that answered, for the metrics' route template
                scope["route"] = inner["route"]
