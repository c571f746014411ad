"""Provides `Feeds`: the feed subscriptions of one MCP server (docs/mcp.md, "Feeds and subscriptions"), and `Outbox`,
the notifications one listener has pending.

A subscription is a feed URI (`memory://feed`, `memory://feed/{scope}`) held by a listener: a 2025-11-25
session (`resources/subscribe`) or a 2026-07-28 `subscriptions/listen` stream (`sdk.py` speaks both). No
loop of its own looks for changes: `Feeds` is one follower of the wake hub the server's push follows use
(a write through this server, the change-token probe, PostgreSQL's LISTEN), and on each wake-up reads, in one
statement, the clocks of every subscribed scope's bucket; only a scope whose clock moved is read further (a
domain: whether an entry landed in it or left it). Before anything is sent the keys are looked up again: a
revoked key's subscriptions, and a room's whose membership ended, are dropped without a word.

A notification is a level trigger ("read it again"): an outbox holds each URI once however often its scope
moves, and sends one at a time within `SEND_SECONDS`; a listener that takes none for that long is cut (its
subscriptions dropped). No SDK here: `sdk.py` wraps it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from mnemo_tui.agents import surface
from mnemo_tui.errors import AuthError, Forbidden, MnemoError, RateLimited
from mnemo_tui.limits import room_of
from mnemo_tui.values.model import RecentQuery

T = TypeVar("T")
SEND_SECONDS = 10.0  # a notification its listener has not taken within this cuts the listener
MAX_SUBSCRIPTIONS = 2_000  # feed subscriptions held at once on one server (past it 503, retryable)
MAX_SUBSCRIPTIONS_PER_KEY = 100  # by one key (past it 429, retryable), as a follow's bound
log = logging.getLogger("mnemo.mcp")

# `fn(engine)` off the event loop (a database thread of the server; the stdio server's worker thread).
Run = Callable[[Callable[[Any], T]], Awaitable[T]]


class Wakes(Protocol):
    """What tells the subscriptions that scopes may have moved (`server/wake.py`'s `Hub`, or `Probe`)."""

    generation: int
    closed: bool
    clocks: Callable[[list[int]], Awaitable[dict[int, int]]] | None

    def join(self) -> Any: ...

    def leave(self, follower: Any) -> None: ...


class Bounds(Protocol):
    """The subscriptions open at once (the server's are bounded as its follows: `follow.Bounds`)."""

    def take(self, key: str) -> None: ...

    def give(self, key: str) -> None: ...


class Capped:
    """Bounds of one process's own subscriptions (the stdio server: one key): at most `limit`, past it 429."""

    def __init__(self, limit: int = MAX_SUBSCRIPTIONS_PER_KEY) -> None:
        self.limit, self.open = limit, 0

    def take(self, key: str) -> None:
        if self.open >= self.limit:
            raise RateLimited(f"this session holds {self.limit} feed subscriptions already; unsubscribe one first")
        self.open += 1

    def give(self, key: str) -> None:
        self.open -= 1


class Outbox:
    """One listener's pending notifications, each URI once, sent in order by `pump`; `end` stops it."""

    def __init__(self, key: str, principal: str) -> None:
        self.key, self.principal = key, principal
        self.watches: dict[str, Watch] = {}  # by URI as subscribed
        self.pending: dict[str, None] = {}
        self.ready = asyncio.Event()
        self.ended = False
        self.sent = 0

    def put(self, uri: str) -> None:
        if not self.ended:
            self.pending[uri] = None
            self.ready.set()

    def end(self) -> None:
        self.ended = True
        self.ready.set()

    async def pump(self, send: Callable[[str], Awaitable[None]], seconds: float | None = None) -> bool:
        """Sends what is pending as it comes, until `end`; False when a send took past `seconds` (`SEND_SECONDS`
        unless given: the listener is then to be cut), True when ended."""
        deadline = SEND_SECONDS if seconds is None else seconds
        while not self.ended:
            await self.ready.wait()
            self.ready.clear()
            while self.pending and not self.ended:
                uri = next(iter(self.pending))
                del self.pending[uri]
                try:
                    async with asyncio.timeout(deadline):
                        await send(uri)
                except TimeoutError:
                    return False
                self.sent += 1
        return True


class Watch:
    """One subscribed URI of one outbox: its scope, and the scope's position last seen."""

    __slots__ = ("bucket", "outbox", "position", "scope", "uri")

    def __init__(self, outbox: Outbox, uri: str, scope: str | None, position: int, bucket: int | None) -> None:
        self.outbox, self.uri, self.scope, self.position, self.bucket = outbox, uri, scope, position, bucket


def _landed(engine: Any, principal: str, scope: str, after: int, upto: int) -> bool:
    """Whether an entry of the domain `scope` landed in `(after, upto]` or one of its entries left in it."""
    rows, _ = engine.entries_after(principal, RecentQuery(scope=scope), after, upto, 1)
    if rows:
        return True
    found = engine.removals(principal, scope, after, upto, limit=1)
    return bool(found.items) or bool(found.gone)


class Feeds:
    """The feed subscriptions of one server, fed by `wakes`.

    Args:
        wakes: the wake hub (or the stdio server's `Probe`).
        run: reads off the event loop.
        check: looks a key up again (raises `AuthError` once it is revoked).
        bounds: the subscriptions open at once, by key and in all.
    """

    def __init__(self, wakes: Wakes, run: Run[Any], check: Callable[[str], Awaitable[object]], bounds: Bounds):
        self.wakes, self.run, self.check, self.bounds = wakes, run, check, bounds
        self.watches: set[Watch] = set()
        self.listeners: set[Outbox] = set()
        self.looks = 0  # wake-ups that read anything (the tests and the benchmark count them)
        self.queued = 0  # updates put in a live listener's outbox (`/metrics`: `mnemo_feed_updates_total`)
        self.send_seconds = SEND_SECONDS  # a listener's send deadline (`mnemo serve --subscription-send-timeout`)
        self._looking: asyncio.Task[None] | None = None
        self._dirty = False

    async def watch(self, outbox: Outbox, uri: str) -> None:
        """Subscribes `outbox` to `uri` (again: nothing more), once the key may read its scope.

        Raises:
            LookupError: `uri` names no feed.
            MnemoError: the scope is not the key's to read (`Forbidden`, `ValidationError`), or a bound.
        """
        scope = surface.feed_scope(uri)
        if uri in outbox.watches:
            return
        self.bounds.take(outbox.key)
        seen = self.wakes.generation  # before the read: a write landing after it is looked at
        try:
            principal = outbox.principal
            last, member, bucket = await self.run(lambda engine: engine.position(principal, scope))
            if not member:
                raise Forbidden("the room was deleted (or you are no longer a member)")
        except BaseException:
            self.bounds.give(outbox.key)
            raise
        if outbox.ended or uri in outbox.watches:  # the listener went away meanwhile, or subscribed twice at once
            self.bounds.give(outbox.key)
            return
        found = Watch(outbox, uri, scope, int(last), bucket)
        outbox.watches[uri] = found
        self.watches.add(found)
        if self.wakes.generation != seen:
            self._dirty = True
        self._start()

    def unwatch(self, outbox: Outbox, uri: str) -> None:
        found = outbox.watches.pop(uri, None)
        if found is not None:
            self.watches.discard(found)
            self.bounds.give(outbox.key)

    def opened(self, outbox: Outbox) -> Outbox:
        """A listener begins (`close` ends it)."""
        self.listeners.add(outbox)
        return outbox

    def close(self, outbox: Outbox) -> None:
        """The listener is gone (its session ended, its stream closed, it was cut): everything of it freed."""
        for uri in list(outbox.watches):
            self.unwatch(outbox, uri)
        outbox.end()
        self.listeners.discard(outbox)

    def close_all(self) -> None:
        """The server stops listening (stdin ended): every listener ends, a listen stream with its result."""
        for outbox in list(self.listeners):
            self.close(outbox)

    def _start(self) -> None:
        if self._looking is None or self._looking.done():
            self._looking = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        wakes = self.wakes
        follower = wakes.join()
        seen = wakes.generation
        try:
            while self.watches and not wakes.closed:
                if self._dirty or wakes.generation != seen:
                    self._dirty, seen = False, wakes.generation
                    try:
                        await self._look()
                    except Exception as exc:  # noqa: BLE001 - a store that does not answer now may at the next wake
                        log.warning("subscriptions: the scopes could not be read: %s", exc)
                else:
                    await follower.wait()
                    follower.quiet_since = asyncio.get_running_loop().time()  # no heartbeat of ours: not poked
        finally:
            wakes.leave(follower)

    async def _look(self) -> None:
        """One wake-up: the keys looked up again, the buckets' clocks read at once, the moved scopes read."""
        self.looks += 1
        for key in {w.outbox.key for w in self.watches}:
            try:
                await self.check(key)
            except AuthError:  # revoked: its subscriptions end (any next request of the key is refused too)
                for gone in {w.outbox for w in self.watches if w.outbox.key == key}:
                    self.close(gone)
        buckets = sorted({w.bucket for w in self.watches if w.bucket is not None})
        clocks: dict[int, int] = {}
        if buckets and self.wakes.clocks is not None:
            clocks = await self.wakes.clocks(buckets)
        groups: dict[tuple[str, str | None, int], list[Watch]] = {}
        for w in self.watches:
            if w.bucket is not None and w.bucket in clocks and clocks[w.bucket] <= w.position:
                continue  # its bucket did not move
            groups.setdefault((w.outbox.principal, w.scope, w.position), []).append(w)
        for (principal, scope, position), watches in groups.items():
            await self._moved(principal, scope, position, watches)

    async def _moved(self, principal: str, scope: str | None, position: int, watches: list[Watch]) -> None:
        """The watches of one scope at one position, whose bucket moved: each notified when the scope did."""
        try:
            last, member, bucket = await self.run(lambda engine: engine.position(principal, scope))
        except Forbidden:
            member = False
        if not member:  # the membership ended (or the room is gone): no more of it reaches this key
            for w in watches:
                self.unwatch(w.outbox, w.uri)
            return
        if last <= position:
            return
        landed = True  # the own store and a room are their buckets: a moved clock is a change
        if scope is not None and room_of(scope) is None:
            domain = scope
            landed = await self.run(lambda engine: _landed(engine, principal, domain, position, last))
        for w in watches:
            w.position, w.bucket = int(last), bucket
            if landed and not w.outbox.ended:
                w.outbox.put(w.uri)
                self.queued += 1


class Probe:
    """The stdio server's wakes on the embedded store: its change token read every `seconds` while anyone
    subscribes, as the embedded follow reads it (`mnemo recent --follow`), and a wake-up when it moves."""

    def __init__(self, token: Callable[[], Awaitable[object]], seconds: float) -> None:
        self.token, self.seconds = token, seconds
        self.generation = 0
        self.closed = False
        self.clocks: Callable[[list[int]], Awaitable[dict[int, int]]] | None = None
        self._followers: set[_Waiter] = set()
        self._ticking: asyncio.Task[None] | None = None

    def join(self) -> _Waiter:
        waiter = _Waiter()
        self._followers.add(waiter)
        if self._ticking is None or self._ticking.done():
            self._ticking = asyncio.get_running_loop().create_task(self._tick())
        return waiter

    def leave(self, follower: Any) -> None:
        self._followers.discard(follower)

    def wake(self) -> None:
        self.generation += 1
        for waiter in self._followers:
            waiter.event.set()

    async def _tick(self) -> None:
        last: object = None
        while self._followers and not self.closed:
            try:
                token = await self.token()
            except MnemoError as exc:  # a store that does not answer now may later
                log.warning("subscriptions: the change token could not be read: %s", exc)
            else:
                if token != last:  # the first read wakes too: a write since a subscription's read is not missed
                    self.wake()
                last = token
            await asyncio.sleep(self.seconds)


class _Waiter:
    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.quiet_since = 0.0

    async def wait(self) -> None:
        await self.event.wait()
        self.event.clear()
