"""Provides the wake-up hub of one server's push follows (docs/server.md, "Push follow"): what tells every
follower, at once, that its scope may have moved.

One hub per server, never a timer or a database thread per follower: a write through this server wakes
it after commit; one tick for all followers checks their heartbeats and, while anyone follows, probes the
engine's change token (writers in other processes, other servers); on PostgreSQL one listening connection
hears the other servers' `NOTIFY mnemo_changes`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

HEARTBEAT_SECONDS = 15.0  # of silence on a stream before a heartbeat (docs/server.md; the client waits 45 s)
SQLITE_PROBE_SECONDS = 0.25  # PRAGMA data_version, while anyone follows: writers in other processes
PG_POLL_SECONDS = 1.0  # the slow poll beside LISTEN: a transaction pooler loses notifications silently
CHANNEL = "mnemo_changes"
LISTEN_RETRY_SECONDS = 1.0
log = logging.getLogger("mnemo.server")

Token = Callable[[], Awaitable[Any]]
Clocks = Callable[[list[int]], Awaitable[dict[int, int]]]


class Follower:
    """One open follow as the hub sees it: a future to wake and when it last sent a byte."""

    __slots__ = ("bucket", "gone", "quiet_since", "waiter")

    def __init__(self, now: float) -> None:
        self.waiter: asyncio.Future[None] | None = None
        self.gone = False  # its client went away
        self.quiet_since = now
        self.bucket: int | None = None  # its scope's bucket, once it exists: the hub reads its clock

    def poke(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until the hub, the heartbeat tick, the client's departure or the server's shutdown pokes it."""
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None


class Hub:
    """The wake-ups of one server's followers.

    Args:
        token: reads the engine's change token (a coroutine; None: no probe, only this server's writes).
        probe_seconds: how often the token is read while anyone follows.
        heartbeat: seconds of silence after which a follower sends a heartbeat.
        listener: PostgreSQL's LISTEN/NOTIFY (None on SQLite, or behind a transaction pooler: it only sends).
    """

    def __init__(
        self,
        token: Token | None,
        probe_seconds: float,
        heartbeat: float = HEARTBEAT_SECONDS,
        listener: PgListener | None = None,
        clocks: Clocks | None = None,
    ) -> None:
        self.token = token
        self.clocks = clocks
        self._batch: asyncio.Future[dict[int, int]] | None = None
        self._batch_at = -1
        self.probe_seconds = probe_seconds
        self.heartbeat = heartbeat
        self.listener = listener
        self.generation = 0  # moves on every wake-up; a follower reads its scope when it moved
        self.closed = False
        self.followers: set[Follower] = set()
        self._ticking: asyncio.Task[None] | None = None
        self.probes = 0  # token reads made (the tests count them)

    def join(self) -> Follower:
        loop = asyncio.get_running_loop()
        follower = Follower(loop.time())
        self.followers.add(follower)
        if self._ticking is None or self._ticking.done():
            self._ticking = loop.create_task(self._tick())
        if self.listener is not None:
            self.listener.start(self)
        return follower

    def leave(self, follower: Follower) -> None:
        self.followers.discard(follower)

    def wake(self) -> None:
        """Every follower reads its scope's position again."""
        self.generation += 1
        for follower in self.followers:
            follower.poke()

    async def clock(self, bucket: int) -> int | None:
        """The bucket's clock as read after the latest wake-up, by one read for every follower's bucket
        (shared by all followers woken by it); None when it could not be read (the follower reads itself)."""
        if self.clocks is None:
            return None
        if self._batch is None or self._batch_at != self.generation:
            self._batch_at = self.generation
            buckets = sorted({f.bucket for f in self.followers if f.bucket is not None} | {bucket})
            self._batch = asyncio.ensure_future(self.clocks(buckets))
        try:
            found = await asyncio.shield(self._batch)
        except Exception:  # noqa: BLE001 - each follower then reads its own scope
            return None
        return found.get(bucket)

    def written(self) -> None:
        """A write of this server committed: wake its followers, and the other servers' (coalesced NOTIFY)."""
        self.wake()
        if self.listener is not None and not self.closed:
            self.listener.notify()

    def close(self) -> None:
        """The server stops: every stream ends (its clients reconnect elsewhere or later)."""
        self.closed = True
        for follower in self.followers:
            follower.poke()
        if self._ticking is not None:
            self._ticking.cancel()
        if self.listener is not None:
            self.listener.close()

    async def wait_closed(self) -> None:
        """Until what `close` stopped has ended: the LISTEN connection is closed."""
        if self.listener is not None:
            await self.listener.wait_closed()

    async def _tick(self) -> None:
        """One loop for every follower: heartbeats due, and the change token while anyone follows."""
        loop = asyncio.get_running_loop()
        period = min(self.probe_seconds, self.heartbeat / 4)
        last: Any = None
        next_probe = loop.time()
        while self.followers and not self.closed:
            now = loop.time()
            if self.token is not None and now >= next_probe:
                next_probe = now + self.probe_seconds
                try:
                    self.probes += 1
                    token = await self.token()
                except Exception as exc:  # noqa: BLE001 - a store that does not answer now may later
                    log.warning("follow: the change token could not be read: %s", exc)
                else:
                    # The first read wakes too: a write between a follower's first read and this one is not missed.
                    if token != last:
                        self.wake()
                    last = token
            now = loop.time()
            for follower in self.followers:
                if now - follower.quiet_since >= self.heartbeat:
                    follower.poke()
            await asyncio.sleep(period)


class PgListener:
    """PostgreSQL's wake-ups between servers: one autocommit connection that LISTENs (not behind a
    transaction pooler, where notifications are lost without a word), and a NOTIFY after this server's
    writes commit, coalesced (one in flight at a time; writes meanwhile ask for one more), sent by `send`
    (a database thread's engine, outside any write's transaction: a NOTIFY inside one serialises every
    commit of the cluster).

    Nothing it opens outlives the server: the NOTIFY has no connection of its own (the engines' are closed
    with their threads), and `wait_closed` returns once the LISTEN connection is closed."""

    def __init__(self, url: str, *, listen: bool, send: Callable[[str], Awaitable[None]]) -> None:
        self.url = url
        self.listen = listen
        self.send = send
        self.me = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # our own notifications wake us already
        self.heard = 0  # notifications from other servers (the tests count them)
        self.listening = False
        self._hub: Hub | None = None
        self._listening: asyncio.Task[None] | None = None
        self._sending: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False

    def start(self, hub: Hub) -> None:
        self._hub = hub
        if self.listen and self._listening is None and not self._closed:
            self._listening = asyncio.get_running_loop().create_task(self._listen())

    async def _connect(self) -> Any:
        from mnemo_tui.engine.postgres.pools import listening

        return await listening(self.url)

    async def _open(self) -> Any:
        """The listening connection, never left half-open when the server stops while it connects."""
        connecting = asyncio.ensure_future(self._connect())
        try:
            return await asyncio.shield(connecting)
        except asyncio.CancelledError:
            # A connection dropped halfway keeps its server process waiting in authentication for
            # `authentication_timeout` (60 s), and a DROP DATABASE waits for it: let the connect end
            # (it has a timeout of its own), then close it.
            with suppress(Exception):
                await (await asyncio.shield(connecting)).close()
            raise

    async def _listen(self) -> None:
        while not self._closed:
            try:
                conn = await self._open()
                try:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening = True
                    if self._hub is not None:
                        self._hub.wake()  # what was written while no one listened
                    async for note in conn.notifies():
                        if note.payload != self.me and self._hub is not None:
                            self.heard += 1
                            self._hub.wake()
                finally:
                    self.listening = False
                    with suppress(Exception):
                        await conn.close()
            except Exception as exc:  # noqa: BLE001 - the database went away: listen again in a moment
                log.warning("follow: LISTEN %s failed (the slow poll goes on): %s", CHANNEL, exc)
            await asyncio.sleep(LISTEN_RETRY_SECONDS)

    def notify(self) -> None:
        if self._sending is not None and not self._sending.done():
            self._again = True
            return
        self._sending = asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        self._again = True
        while self._again and not self._closed:
            self._again = False
            try:
                await self.send(self.me)
            except Exception as exc:  # noqa: BLE001 - the other servers' slow poll finds the write
                log.warning("follow: NOTIFY %s failed (other servers' slow poll finds the write): %s", CHANNEL, exc)
                return

    def close(self) -> None:
        """Stops listening and sending (a NOTIFY already in a database thread ends there, as any call)."""
        self._closed = True
        for task in (self._listening, self._sending):
            if task is not None:
                task.cancel()

    async def wait_closed(self) -> None:
        """Until the LISTEN connection is closed (after `close`)."""
        tasks = [task for task in (self._listening, self._sending) if task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)


def hub(pool: Any, database: str | None, pooled: bool, heartbeat: float = HEARTBEAT_SECONDS) -> Hub:
    """The hub of a server over `pool`'s engine: SQLite's change token read on the event loop every
    `SQLITE_PROBE_SECONDS`; PostgreSQL's in a database thread every `PG_POLL_SECONDS`, beside LISTEN
    (not tried behind a transaction pooler) and NOTIFY (in a database thread too)."""
    from mnemo_tui.server.pool import READ

    async def token() -> Any:
        return await pool.run(lambda engine: engine.change_token(), at_once=READ)

    async def clocks(buckets: list[int]) -> dict[int, int]:
        found: dict[int, int] = await pool.run(lambda engine: engine.bucket_clocks(buckets), at_once=READ)
        return found

    async def send(payload: str) -> None:
        await pool.run(lambda engine: _notify(engine, payload))

    if database is None:
        return Hub(token, SQLITE_PROBE_SECONDS, heartbeat, clocks=clocks)
    return Hub(token, PG_POLL_SECONDS, heartbeat, PgListener(database, listen=not pooled, send=send), clocks)


def _notify(engine: Any, payload: str) -> None:
    """NOTIFY on a database thread's engine (a PostgreSQL one: a hub with a listener serves a database)."""
    from mnemo_tui.engine.postgres.store import PgDatabase

    if not isinstance(engine, PgDatabase):
        raise TypeError(f"a NOTIFY needs a PostgreSQL engine, not {type(engine).__name__}")
    engine.notify(CHANNEL, payload)
