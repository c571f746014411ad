"""Provides `POST /memory/follow`: mnemo serve's push follow, a scope's new entries and removals as server-sent
events (docs/server.md, "Push follow"; the protocol: issue 38).

A position P is an instant of the scope's bucket clock: every entry and removal at or before it has been
sent. On each wake-up the scope's clock `last` is read first, then what lies in (P, last]; an in-flight
write holds the clock and stamps past `last`, so the next wake-up finds it. Events go out oldest part
first, each `id:` the exact position it completes (entries newest first within an event), so a stream
cut anywhere resumes from its last `id:` with nothing skipped and nothing sent twice (but the removals of
an instant past 100 an event, whose cut events complete only the instant before: `window`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from mnemo_tui import timefmt
from mnemo_tui.errors import Forbidden, MnemoError, RemovalsGone, Unavailable, Unprocessable
from mnemo_tui.server import bodies
from mnemo_tui.server.bounds import PerKey
from mnemo_tui.server.envelope import dumps
from mnemo_tui.server.middleware import caller, read_body
from mnemo_tui.server.pool import READ
from mnemo_tui.server.removals_route import GONE
from mnemo_tui.server.streamed import Stalled, Streamed, Write
from mnemo_tui.server.wake import Follower, Hub
from mnemo_tui.values.model import RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.engine.interface import Engine
    from mnemo_tui.server.pool import EnginePool
    from mnemo_tui.values.removals import Position, Removal


class Served(Protocol):
    """What a follow uses of the app's shared parts (`app.Served`)."""

    pool: EnginePool
    hub: Hub
    follows: Bounds
    streams: set[Streamed]
    translate: Callable[[BaseException], MnemoError]

    async def principal(self, key: str) -> str: ...


MAX_FOLLOWS = 500  # open at once on one server (`mnemo serve --max-follows`)
MAX_FOLLOWS_PER_KEY = 100
CHUNK = 100  # entries an event carries at most
# An event's items (their UTF-8 texts and commas) total at most this, so that a stalled follow holds about
# two events (the one being sent, the one held back) and an entries event stays far below the client's cap
# (`remote_follow.MAX_EVENT`, 32 MiB) whatever the entries: an entry larger than the bound goes alone.
EVENT_BYTES = 1 << 20
RETRY_MS = 2000
MEDIA = "text/event-stream; charset=utf-8"
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_POSITION = re.compile(r"[0-9]{1,19}\Z")
MAX_POSITION = 2**63 - 1  # a position is a signed 64-bit integer in every store (SQLite INTEGER, bigint)
_LINES = re.compile(rb"\r\n|\r|\n")


class FollowBody(bodies.Recent):
    """The body of `POST /memory/recent`; `cursor` and `until` are refused (a follow starts at the top and never ends)."""


class Bounds:
    """The follows open at once: per key (`PerKey`), and on this server."""

    def __init__(self, max_follows: int = MAX_FOLLOWS, per_key: int | None = None) -> None:
        self.max_follows = max_follows
        self.keys = PerKey(MAX_FOLLOWS_PER_KEY if per_key is None else per_key, "TOO_MANY_FOLLOWS", "follows")
        self.open = 0

    def take(self, key: str) -> None:
        self.keys.take(key)
        if self.open >= self.max_follows:
            self.keys.give(key)
            raise Unavailable(f"this server serves {self.max_follows} follows already; retry later or elsewhere")
        self.open += 1

    def give(self, key: str) -> None:
        self.open -= 1
        self.keys.give(key)


def last_event_id(request: Request) -> int | None:
    """The position to resume after (`Last-Event-ID`): only what this server emits, digits.

    Raises:
        Unprocessable: anything else.
    """
    value = request.headers.get("last-event-id")
    if value is None:
        return None
    if not _POSITION.match(value.strip()) or int(value.strip()) > MAX_POSITION:
        raise Unprocessable("Last-Event-ID must be a position this server sent (digits, below 2^63)")
    return int(value.strip())


def event(name: bytes, data: bytes, position: int | None) -> bytes:
    """One server-sent event; `data` on as many `data:` lines as it has lines (JSON has none but whitespace)."""
    head = b"event: " + name + b"\n" + (b"id: %d\n" % position if position is not None else b"")
    if b"\n" not in data and b"\r" not in data:  # compact JSON: one line, copied once (an event may be 1 MiB)
        return b"".join((head, b"data: ", data, b"\n\n"))
    return head + b"".join(b"data: " + line + b"\n" for line in _LINES.split(data)) + b"\n"


def failure_event(exc: MnemoError) -> bytes:
    return event(b"error", dumps({"error": {**exc.envelope(None), "status": exc.status}}), None)


class Gone(Exception):
    """The client went away, or the server stops: the stream ends."""


class Follow:
    """One open follow: its query, its position, and the stream it writes."""

    def __init__(self, served: Served, who: str, query: RecentQuery, follower: Follower, key: str = "") -> None:
        self.served = served
        self.key = key
        self.hub: Hub = served.hub
        self.who = who
        self.query = query
        self.follower = follower
        self._write: Write | None = None
        self._held: tuple[bytes, bytes] | None = None
        self._held_at = 0
        self.translate: Callable[[BaseException], MnemoError] = served.translate

    async def run(self, fn: Callable[[Engine], Any]) -> Any:
        return await self.served.pool.run(fn, at_once=READ)

    async def page(self, after: int, last: int) -> tuple[list[tuple[int, str]], bool]:
        """The window's next event of entries (at most `CHUNK` and `EVENT_BYTES`), and whether more follow."""
        who, q = self.who, self.query
        found: tuple[list[tuple[int, str]], bool] = await self.run(
            lambda engine: engine.entries_after(who, q, after, last, CHUNK, EVENT_BYTES)
        )
        return found

    async def position(self) -> tuple[int, bool]:
        """The scope's position and whether its entries are still the principal's to read; its bucket is
        handed to the hub, which reads every follower's bucket clock in one statement a wake-up."""
        who, scope = self.who, self.query.scope
        last, member, bucket = await self.run(lambda engine: engine.position(who, scope))
        self.follower.bucket = bucket
        return int(last), bool(member)

    async def moved(self, position: int) -> bool:
        """Whether the scope's bucket clock may be past `position` (read once for all followers by the hub)."""
        bucket = self.follower.bucket
        if bucket is None:
            return True
        clock = await self.hub.clock(bucket)
        return clock is None or clock > position

    async def allowed(self) -> None:
        """The key is looked up again before anything more is sent: a key revoked since the stream began
        ends it with the AUTH error (401, final), as any next request of the key would get.

        Raises:
            MnemoError: the key's lookup failed (revoked, or the store cannot say).
        """
        if self.key:
            await self.served.principal(self.key)

    async def send(self, part: bytes) -> None:
        if self.follower.gone or self.hub.closed:
            raise Gone
        assert self._write is not None
        await self._write(part)
        self.follower.quiet_since = asyncio.get_running_loop().time()

    async def emit(self, name: bytes, data: bytes, position: int) -> None:
        """Sends the event held back, with its own position, and holds this one: the last of a window goes
        out with the window's end as its position (`flush`)."""
        held, self._held = self._held, None
        if held is not None:  # sent as its event only: a stalled client holds it once, beside the one held back
            framed = event(*held, self._held_at)
            del held
            await self.send(framed)
        self._held, self._held_at = (name, data), position

    async def flush(self, last: int) -> bool:
        held, self._held = self._held, None
        if held is None:
            return False
        await self.send(event(*held, last))
        return True

    async def window(self, after: int, last: int, *, removals: bool = True) -> bool:
        """Sends the scope's entries (and removals) in (after, last] in order of their instants, a run of one
        kind an event, at most `CHUNK` entries and `EVENT_BYTES` of them (or `CHUNK` removals) an event; whether
        anything was sent.

        Raises:
            RemovalsGone: tombstones after `after` were dropped (past the retention).
        """
        gone = _Removed(self, after, last) if removals else None
        removal = await gone.head() if gone is not None else None  # a window past the retention: said first
        position = after
        while True:
            page, full = await self.page(position, last)
            horizon = page[-1][0] if full else last
            ei = 0
            while ei < len(page) or (removal is not None and removal.removed_at <= horizon):
                next_entry = page[ei][0] if ei < len(page) else horizon + 1
                if gone is not None and removal is not None and removal.removed_at < next_entry:
                    run: list[Removal] = []
                    while (
                        removal is not None and removal.removed_at < min(next_entry, horizon + 1) and len(run) < CHUNK
                    ):
                        run.append(removal)
                        removal = await gone.pop()
                    # A run cut inside one instant (a set deleted at once) completes only the instant before:
                    # a stream resumed from it hears that instant's removals again, and misses none.
                    at = run[-1].removed_at
                    split = removal is not None and removal.removed_at == at
                    await self.emit(b"removed", dumps({"removed": [r.wire() for r in run]}), at - 1 if split else at)
                else:
                    next_removal = removal.removed_at if removal is not None else horizon + 1
                    first = ei
                    while ei < len(page) and page[ei][0] < next_removal:
                        ei += 1
                    at = page[ei - 1][0]
                    data = b'{"items":[' + ",".join(wire for _, wire in reversed(page[first:ei])).encode() + b"]}"
                    page[first:ei] = [(t, "") for t, _ in page[first:ei]]  # their texts are the event's now
                    await self.emit(b"entries", data, at)
                    del data
            if not full:
                break
            position = horizon
        return await self.flush(last)

    async def start(self, resume: int | None, last: int, since: int | None) -> None:
        if resume is not None:
            await self.window(resume, last)
            return
        if since is not None:
            sent = await self.window(since - 1, last, removals=False)
        else:  # the newest page: its window, oldest part first in bounded events as any window
            who, q = self.who, self.query
            first = await self.run(lambda engine: engine.page_start(who, q, last))
            sent = await self.window(first, last, removals=False)
        if not sent:  # the client learns its position at once
            await self.send(event(b"entries", b'{"items":[]}', last))

    async def stream(
        self, write: Write, resume: int | None, last: int, member: bool, since: int | None, seen: int
    ) -> None:
        """`seen`: the hub's generation noted before `last` was read, so a write between the two wakes it."""
        self._write = write
        follower, hub = self.follower, self.hub
        try:
            await self.send(b"retry: %d\n\n" % RETRY_MS)
            await self.start(resume, last, since)
            position = last
            while member:
                if hub.generation != seen:
                    seen = hub.generation
                    if not await self.moved(position):
                        continue
                    last, member = await self.position()
                    if last > position:
                        await self.allowed()
                        await self.window(position, last)
                        position = last
                elif asyncio.get_running_loop().time() - follower.quiet_since >= hub.heartbeat:
                    await self.allowed()
                    await self.send(event(b"heartbeat", b"{}", position))
                else:
                    if follower.gone or hub.closed:
                        return
                    await follower.wait()
            # A deleted room: its removals were sent to its former member, and nothing more will come.
            await self.send(failure_event(Forbidden("the room was deleted (or you are no longer a member)")))
        except Gone:
            return
        except Stalled:
            raise  # the client stopped reading: nothing more can reach it
        except Exception as exc:  # noqa: BLE001 - said on the stream, which then ends
            if not (follower.gone or hub.closed):
                await write(failure_event(self.translate(exc)))


class _Removed:
    """The removals of one window of a follow, read `CHUNK` at a time as its events reach them (a follow
    resumed from long ago never holds its scope's every tombstone)."""

    def __init__(self, follow: Follow, after: int, last: int) -> None:
        self.follow, self.after, self.last = follow, after, last
        self.items: list[Removal] = []
        self.at = 0
        self.start: Position | None = None
        self.more = True

    async def head(self) -> Removal | None:
        """The next removal of the window (None: no more), reading the next page when this one is spent.

        Raises:
            RemovalsGone: tombstones after the window's start were dropped (past the retention).
        """
        while self.at >= len(self.items) and self.more:
            await self._read()
        return self.items[self.at] if self.at < len(self.items) else None

    async def _read(self) -> None:
        who, scope, after, last, start = self.follow.who, self.follow.query.scope, self.after, self.last, self.start
        found = await self.follow.run(lambda engine: engine.removals(who, scope, after, last, limit=CHUNK, start=start))
        if found.gone:
            raise RemovalsGone(GONE, details={"reason": "removals_gone"})
        self.items, self.at, self.start, self.more = found.items, 0, found.next, found.next is not None

    async def pop(self) -> Removal | None:
        """Past the head: the next one."""
        self.at += 1
        return await self.head()


async def _watch(request: Request, follower: Follower) -> None:
    """Marks the follower gone when its client disconnects (the request's body was read whole before)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            follower.gone = True
            follower.poke()
            return


def handler(served: Served) -> Callable[[Request], Awaitable[Response]]:
    """`POST /memory/follow`: the key first (the middleware's), then the body, `Last-Event-ID` and the bounds,
    then the scope's position (a stranger to a room is refused before the stream starts); every refusal is
    raised, and answered with its envelope."""

    async def follow(request: Request) -> Response:
        who = caller(request)
        raw = await read_body(request)
        b = bodies.parse(FollowBody, raw)  # an empty body is missing (422), as for every other operation
        for refused in ("cursor", "until"):
            if getattr(b, refused) is not None:
                raise Unprocessable(f"{refused} is refused on a follow (it starts at the newest and never ends)")
        resume = last_event_id(request)
        since = None if b.since is None else timefmt.parse_iso(b.since)
        query = RecentQuery(
            scope=b.domain, exclude_author=b.exclude_author, limit=b.limit, include_history=b.include_history
        ).validated()
        key = who.key
        served.follows.take(key)
        follower = served.hub.join()
        one = Follow(served, who.principal, query, follower, key)
        watching: list[asyncio.Task[None]] = []

        def done() -> None:
            served.hub.leave(follower)
            served.follows.give(key)
            for task in watching:
                task.cancel()

        seen = served.hub.generation  # before the read: a write landing after it moves the generation
        try:
            last, member = await one.position()
            if not member and resume is None:
                raise Forbidden("you are not a member of this room (or it does not exist)")
        except BaseException:
            done()
            raise
        watching.append(asyncio.get_running_loop().create_task(_watch(request, follower)))

        async def produce(write: Write) -> None:
            await one.stream(write, resume, last, member, since, seen)

        return Streamed(produce, MEDIA, HEADERS, served.streams, done)

    return follow
