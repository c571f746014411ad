"""Provides `/mcp`: the agents' MCP face (`agents/http.py`, the SDK's streamable HTTP transport) mounted in the
app, behind what the server adds to it (docs/mcp.md, "Over HTTP"): the key of every request, checked (and its
rate counted) by REST's own `Keys`; the server's 1 MiB body bound; each key's requests open at once bounded;
every refusal a JSON-RPC error body with its HTTP status; and the streams it holds ended when the server stops.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.errors import MnemoError, Unavailable
from mnemo_tui.server.bounds import PerKey
from mnemo_tui.server.endpoints import Served
from mnemo_tui.server.envelope import dumps
from mnemo_tui.server.middleware import Caller, KeyRefused, Keys
from mnemo_tui.server.pool import READ
from mnemo_tui.server.ratelimit import Limited

if TYPE_CHECKING:
    from mnemo_tui.agents.http import Face

T = TypeVar("T")
PATH = "/mcp"
MAX_SESSIONS = 1_000  # 2025-11-25 sessions open at once on one server (past it, a new one is 503)
REQUESTS_PER_KEY = 32  # requests to /mcp one key has open at once (event streams included); past it 429
IDLE_SECONDS = 30 * 60.0  # a session with nothing in flight for this long is closed (its id then answers 404)
# The SDK's transport security: `Host` (and `Origin`, when a browser sends one) must be one of these.
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
HOSTS_VARIABLE, ORIGINS_VARIABLE = "MNEMO_MCP_ALLOWED_HOSTS", "MNEMO_MCP_ALLOWED_ORIGINS"
INVALID_REQUEST, INTERNAL_ERROR = -32600, -32603  # JSON-RPC's codes (the SDK answers its own refusals with these)
MAX_SUBSCRIPTIONS = 2_000  # feed subscriptions held at once on one server (past it 503; docs/mcp.md)
MAX_SUBSCRIPTIONS_PER_KEY = 100  # by one key (past it 429), as its follows
SUBSCRIBING = ("resources/subscribe", "subscriptions/listen")  # the methods that take a subscription


def allowed(variable: str, default: tuple[str, ...]) -> list[str]:
    """A comma-separated list from the environment (`mnemo serve`'s), added to the loopback ones."""
    extra = [item.strip() for item in os.environ.get(variable, "").split(",") if item.strip()]
    return [*default, *extra]


def rpc_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """A refusal of a request as the SDK words its own: a JSON-RPC error (no id) with the HTTP status."""
    code = INTERNAL_ERROR if status >= 500 else INVALID_REQUEST
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return Response(dumps(body), status_code=status, headers=headers, media_type="application/json")


def refusal(exc: MnemoError) -> Response:
    headers = {}
    if isinstance(exc, Limited):
        headers["Retry-After"] = str(exc.retry_after)
    elif exc.retryable:
        headers["Retry-After"] = "1"
    if exc.status == 401:
        # A bearer key, as REST's; no `resource_metadata`: this server is no OAuth resource server.
        headers["WWW-Authenticate"] = 'Bearer realm="mnemo"'
    return rpc_error(exc.status, f"{exc.code}: {exc.message}", headers)


class Subscriptions:
    """The feed subscriptions held at once, bounded as the follows are (`follow.Bounds`): per key 429, on the
    server 503, both retryable (with `Retry-After`)."""

    def __init__(self, max_subscriptions: int = MAX_SUBSCRIPTIONS, per_key: int = MAX_SUBSCRIPTIONS_PER_KEY) -> None:
        self.max = max_subscriptions
        self.keys = PerKey(per_key, "TOO_MANY_SUBSCRIPTIONS", "feed subscriptions")
        self.open = 0

    def take(self, key: str) -> None:
        self.keys.take(key)
        if self.open >= self.max:
            self.keys.give(key)
            raise Unavailable(f"this server holds {self.max} feed subscriptions already; retry later or elsewhere")
        self.open += 1

    def give(self, key: str) -> None:
        self.open -= 1
        self.keys.give(key)

    def check(self, key: str) -> None:
        """Raises the refusal `take` would (so a subscribing request is refused with its HTTP status)."""
        self.take(key)
        self.give(key)


class McpMount:
    """The ASGI app at `/mcp`."""

    def __init__(
        self,
        served: Served,
        keys: Keys,
        *,
        max_body: int,
        max_subscriptions: int = MAX_SUBSCRIPTIONS,
        send_seconds: float | None = None,
    ) -> None:
        self.served = served
        self.max_body = max_body
        self.send_seconds = send_seconds
        # REST's key check and rate limits, shared (a key's requests count against one rate, REST's and these)
        self.gate = Keys(keys.principal, PATH, frozenset(), keys.limits)
        self.keys = PerKey(REQUESTS_PER_KEY, "TOO_MANY_MCP_REQUESTS", "MCP requests")
        self.subscriptions = Subscriptions(max_subscriptions)
        # The SDK's face is made at the first request to /mcp (`_face`): importing the SDK holds ~30 MB, most of
        # an idle server's memory, which a server no agent reaches over HTTP need not hold. Its session manager
        # runs in the server's lifespan (`running`) from then on.
        self.face: Face | None = None
        self._group: TaskGroup | None = None
        self._making: anyio.Lock | None = None
        self._ended: anyio.Event | None = None
        self.streams: set[anyio.CancelScope] = set()  # the event streams open (GET), ended when the server stops
        self.stopping = False
        # Each event stream open is counted by the server's metrics (`mnemo_open_streams{kind="mcp"}`) when set.
        self.counted: Callable[[str], AbstractContextManager[None]] = lambda kind: nullcontext()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The mount's life (the server's lifespan; a mounted app's own does not run): the face's session
        manager runs within it once the first request made the face, and stops at its end."""
        async with anyio.create_task_group() as group:
            self._group, self._making, self._ended = group, anyio.Lock(), anyio.Event()
            try:
                yield
            finally:
                self._group = None
                self._ended.set()

    async def _face(self) -> Face:
        """The SDK's face, made at the first request: the SDK imported in a thread (the event loop answers the
        other requests meanwhile), then its session manager started in the lifespan's task group."""
        if self.face is not None:
            return self.face
        if self._making is None:
            raise Unavailable("the server is not running its lifespan: /mcp cannot answer")
        async with self._making:
            if self.face is None:
                face_type = (await anyio.to_thread.run_sync(importlib.import_module, "mnemo_tui.agents.http")).Face
                face = face_type(
                    self.run,
                    allowed_hosts=allowed(HOSTS_VARIABLE, LOOPBACK_HOSTS),
                    allowed_origins=allowed(ORIGINS_VARIABLE, LOOPBACK_ORIGINS),
                    max_sessions=MAX_SESSIONS,
                    max_body=self.max_body,
                    idle_seconds=IDLE_SECONDS,
                    wakes=self.served.hub,
                    read=lambda fn: self.served.pool.run(fn, at_once=READ),
                    check=self.served.principal,
                    bounds=self.subscriptions,
                )
                if face.feeds is not None and self.send_seconds is not None:  # else `subscriptions.SEND_SECONDS`
                    face.feeds.send_seconds = self.send_seconds
                if self._group is None:
                    raise Unavailable("the server is stopping: open the MCP session elsewhere")
                await self._group.start(self._serve_face, face)
                self.face = face
        return self.face

    async def _serve_face(self, face: Face, *, task_status: TaskStatus[None]) -> None:
        async with face.running():
            task_status.started()
            assert self._ended is not None
            await self._ended.wait()

    def feeds(self) -> tuple[int, int]:
        """The feed subscriptions held now and the updates queued so far (`/metrics`)."""
        feeds = None if self.face is None else self.face.feeds
        return self.subscriptions.open, feeds.queued if feeds is not None else 0

    def stop(self) -> None:
        """The server begins to stop: every event stream ends now (a session's client opens a new one, or,
        once the server is gone, a new session elsewhere); calls under way are answered."""
        self.stopping = True
        for scope in list(self.streams):
            scope.cancel()

    async def run(self, principal: str, fn: Callable[[Backend], T], writes: bool) -> T:
        """`fn` on a database thread with the engine acting as `principal`, as a REST route runs."""
        try:
            result: T = await self.served.pool.run(lambda engine: fn(LocalBackend(engine, principal)))
            return result
        finally:
            if writes:  # it may have written: the follows look
                self.served.hub.written()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            checked = await self.gate.authenticate(HTTPConnection(scope))
        except KeyRefused as exc:  # none, unknown or revoked; past its rate; the store could not say
            await refusal(exc.refusal)(scope, receive, send)
            return
        assert checked is not None  # every path under PATH is checked
        caller = checked[1]
        assert isinstance(caller, Caller)
        scope["user"] = caller  # the access log names the principal
        principal, key = caller.principal, caller.key
        try:
            self.keys.take(key)
        except MnemoError as exc:
            await refusal(exc)(scope, receive, send)
            return
        try:
            try:
                face = await self._face()
            except MnemoError as exc:  # the face could not be made: the server is stopping
                await refusal(exc)(scope, receive, send)
                return
            await self._serve(face, scope, receive, send, principal, key)
        finally:
            self.keys.give(key)

    async def _serve(self, face: Face, scope: Scope, receive: Receive, send: Send, principal: str, key: str) -> None:
        if scope["method"] == "POST":
            # The body whole first, within the server's bounds (`BodyLimits` raises past them), so a refusal is
            # this transport's JSON-RPC error rather than the REST envelope; the SDK then reads it again.
            try:
                body = await self._body(receive)
            except MnemoError as exc:
                await refusal(exc)(scope, receive, send)
                return
            if body is None:
                return  # the client went away
            if _subscribing(body):
                # A subscription past its bounds is refused with the follows' statuses, before the SDK answers
                # it inside a 200 (the handler takes the slot itself).
                try:
                    self.subscriptions.check(key)
                except MnemoError as exc:
                    await refusal(exc)(scope, receive, send)
                    return
            given: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

            async def replay() -> Message:
                return given.pop() if given else await receive()

            await face(scope, replay, send, principal=principal, key=key)
            return
        if scope["method"] != "GET":
            await face(scope, receive, send, principal=principal, key=key)
            return
        if self.stopping:
            await refusal(Unavailable("the server is stopping: open the event stream again elsewhere"))(
                scope, receive, send
            )
            return
        # An event stream: ended when the server stops, its answer finished rather than cut.
        started = finished = False

        async def sending(message: Message) -> None:
            nonlocal started, finished
            started = True
            finished = message["type"] == "http.response.body" and not message.get("more_body", False)
            await send(message)

        with anyio.CancelScope() as stream, self.counted("mcp"):
            self.streams.add(stream)
            try:
                await face(scope, receive, sending, principal=principal, key=key)
            finally:
                self.streams.discard(stream)
        if stream.cancelled_caught and started and not finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _body(receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)


def _subscribing(body: bytes) -> bool:
    """Whether the request is one that takes a subscription (parsed only when its name is in the body)."""
    if not any(method.encode() in body for method in SUBSCRIBING):
        return False
    try:
        message = json.loads(body)
    except ValueError:
        return False  # the SDK refuses it
    return isinstance(message, dict) and message.get("method") in SUBSCRIBING


def mounted(
    served: Served,
    keys: Keys,
    max_body: int,
    max_subscriptions: int = MAX_SUBSCRIPTIONS,
    send_seconds: float | None = None,
) -> McpMount | None:
    """The mount, or None when the mcp extra is not installed (then `/mcp` is an unknown path, 404); at most
    `max_subscriptions` feed subscriptions held at once, a listener cut when a notification waits `send_seconds`
    (`subscriptions.SEND_SECONDS` unless given)."""
    if importlib.util.find_spec("mcp") is None:
        return None
    return McpMount(served, keys, max_body=max_body, max_subscriptions=max_subscriptions, send_seconds=send_seconds)
