"""Provides the remote backend's push follow: `POST /memory/follow` read as server-sent events (docs/server.md, "Push follow").

One streamed request through the backend's HTTP client; lines read bounded from its bytes (`Stream.lines`), their
fields decoded by httpx-sse's decoder, items read by the code that reads a page (`remote_wire`).
A stream that drops (a transport error, no byte for `IDLE_SECONDS`, the server gone or ending it)
is asked again with `Last-Event-ID` = the last position received, after the retry policy's backoff.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

from httpx_sse import EventSource

from mnemo_tui.backends.remote_http import (
    NOT_PROCESSED_STATUS,
    TRANSIENT_STATUS,
    Answer,
    DeadlinePassed,
    Stream,
    TransportError,
    error_of,
    retry_after,
    said_retryable,
)
from mnemo_tui.backends.remote_wire import CANONICAL_HEADER, page_of
from mnemo_tui.errors import BY_CODE, MnemoError, Unavailable
from mnemo_tui.limits import dumps
from mnemo_tui.values.follow import Pushed
from mnemo_tui.values.model import Entry, by_author
from mnemo_tui.values.removals import Removal

if TYPE_CHECKING:
    from mnemo_tui.backends.remote_calls import Calls
    from mnemo_tui.values.model import RecentQuery

PATH = "/memory/follow"
# No byte for this long (three heartbeats) is a dead stream: it is asked again.
IDLE_SECONDS = 45.0
# The largest event read: the largest page's size. A line or an event beyond it ends the follow.
MAX_EVENT = 32 << 20
# A refusal's JSON body is read whole up to this.
MAX_REFUSAL = 1 << 20
# A persistent follow's reconnects back off up to this many seconds apart (or the call's deadline, if shorter).
RECONNECT_MAX_WAIT = 10.0


class Ended(TransportError):
    """An `error` event the endpoint says may be retried (503: the store is unavailable): asked again."""


def _error_of_event(data: str) -> MnemoError:
    """The project's error for an `error` event (`{"error": <the envelope's error>}`)."""
    try:
        body = json.loads(data).get("error")
    except (ValueError, AttributeError):
        body = None
    if not isinstance(body, dict):
        return Unavailable("the endpoint ended the follow with an error event that is not an error")
    code = body.get("code")
    message = body.get("message")
    cls = BY_CODE.get(code, Unavailable) if isinstance(code, str) else Unavailable
    details = body.get("details") if isinstance(body.get("details"), dict) else None
    exc = cls(
        message if isinstance(message, str) and message else f"the endpoint ended the follow ({code})", details=details
    )
    if isinstance(body.get("retryable"), bool):
        exc.retryable = body["retryable"]
    return exc


class RemoteFollow:
    """An open push follow of one `RemoteBackend`: iterate it for `Pushed` events; `close()` from any thread.

    It reconnects by itself; it raises the project's error when the endpoint refuses a reconnect,
    when reconnecting fails until the call's deadline, for an `error` event, and for an event too large.

    `on_connection`, when set, hears of an outage as it happens, in the reading thread: called with why
    (a few words) when the stream drops and reconnecting starts, then with None before the first event
    a reconnect brings (once per outage, so a person can be told the feed is down, then back).

    `persistent` (set before iterating): reconnect until closed, as `journalctl -f` and `kubectl get -w`
    keep going, with a backoff capped at `reconnect_cap` seconds, instead of giving up after `deadline`;
    `on_connection` then also hears, at doubling intervals from `deadline` on, that the outage goes on.
    """

    on_connection: Callable[[str | None], object] | None = None
    persistent = False

    def __init__(
        self,
        calls: Calls,
        query: RecentQuery,
        keep: Callable[[Entry], bool] | None,
        first: Stream,
        position: str | None,
    ) -> None:
        self._calls = calls
        self._query = query
        self._keep = keep
        self._stream: Stream | None = first
        self.position = position
        self.connections = 1
        self._closed = False
        self._stop = threading.Event()  # set by close(): a reconnect's backoff ends at once
        self._events = self._run()

    @property
    def deadline(self) -> float:
        """Seconds reconnecting may last from a drop: the backend's call deadline, which `_run` waits by."""
        return self._calls.deadline

    @property
    def reconnect_cap(self) -> float:
        """The longest wait between two reconnects of a persistent follow."""
        return min(RECONNECT_MAX_WAIT, self._calls.max_wait, self._calls.deadline)

    def _still_down(self, since: float, reasons: list[str]) -> Callable[[str], None]:
        """What a persistent reconnect calls after each failed attempt: told at `deadline`, 2x, 4x... seconds down."""
        told = [self._calls.deadline]

        def failed(reason: str) -> None:
            down = time.monotonic() - since
            reasons.append(reason)
            if down >= told[0] and self.on_connection is not None:
                told[0] *= 2
                self.on_connection(f"{reason}, for {down:.0f} s")

        return failed

    def __iter__(self) -> Iterator[Pushed]:
        return self

    def __next__(self) -> Pushed:
        return next(self._events)

    def close(self) -> None:
        self._closed = True
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.abort()
        try:
            self._events.close()
        except ValueError:
            pass  # being read in another thread: its read returns now, and it ends itself

    def _run(self) -> Generator[Pushed, None, None]:
        calls = self._calls
        attempt, deadline = 0, 0.0
        failed: Callable[[str], None] | None = None
        down = False  # an outage was told to `on_connection` and no event came since
        while not self._closed:
            stream = self._stream
            assert stream is not None
            got = False
            reason = "the endpoint ended the stream"
            try:
                for event in self._read(stream):
                    if down and self.on_connection is not None:
                        self.on_connection(None)
                    got, down = True, False
                    yield event
            except TransportError as exc:
                if exc.final:
                    raise Unavailable(f"{calls.identity} sent {exc.reason} on the follow; not asked again") from None
                reason = exc.reason
            finally:
                stream.close()
                self._stream = None
            if self._closed:
                return
            # The backoff and the deadline run on from one drop to the next until an event comes again.
            if got or not attempt:
                attempt, deadline = 0, time.monotonic() + calls.deadline
                failed = self._still_down(time.monotonic(), []) if self.persistent else None
                if self.on_connection is not None:
                    self.on_connection(reason)  # at once: the backoff and the reconnect below may take the deadline
                down = True
            opened = _open(
                calls,
                self._query,
                self.position,
                reconnect=True,
                attempt=attempt,
                deadline=deadline,
                closed=lambda: self._closed,
                pause=self._stop.wait,
                cap=self.reconnect_cap if self.persistent else None,
                failed=failed,
            )
            if opened is None:
                return
            self._stream = opened
            attempt += 1
            self.connections += 1

    def _read(self, stream: Stream) -> Iterator[Pushed]:
        """The events of one connection, until it ends (returns) or drops (raises).

        Each event is shown as it comes: the server sends a wake's chunks oldest part first, each
        with the position it completes (entries newest first within it), so showing them in turn
        keeps the feed's order (docs/server.md, "Push follow").
        """
        canonical = stream.headers.get(CANONICAL_HEADER) == "canonical"
        identity = self._calls.identity
        # httpx-sse decodes the fields; it reads the lines already bounded, as one more response's body.
        events = EventSource(stream.event_lines(MAX_EVENT))
        for event in events.iter_sse():
            kind, position = event.event, event.id or self.position
            if kind == "entries":
                try:
                    page = page_of(event.data.encode("utf-8"), canonical)
                except Unavailable:
                    raise Unavailable(f"{identity} sent a follow event whose items are not a page") from None
                entries = page.items if self._keep is None else [e for e in page.items if self._keep(e)]
                self.position = position
                yield Pushed("entries", position, entries, [])
            elif kind == "removed":
                removals = _removals(event.data, identity)
                self.position = position
                yield Pushed("removed", position, [], removals)
            elif kind == "heartbeat":
                self.position = position
                yield Pushed("heartbeat", position, [], [])
            elif kind == "error":
                problem = _error_of_event(event.data)
                if problem.retryable:
                    raise Ended(problem.message)
                raise problem
            # else: the `retry:` field alone, or an event this client does not know


def _removals(data: str, identity: str) -> list[Removal]:
    try:
        return [Removal.from_wire(item) for item in json.loads(data)["removed"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise Unavailable(f"{identity} sent a follow event whose removals are not a list of removals") from None


def follow_body(query: RecentQuery) -> dict[str, Any]:
    """The follow's body: the `POST /memory/recent` body without `cursor` and `until` (a follow has neither)."""
    from mnemo_tui.backends.remote_wire import wire_time

    exclude = query.exclude_author if "/" not in (query.exclude_author or "") else None
    return {
        "domain": query.scope,
        "since": wire_time(query.since),
        "exclude_author": exclude,
        "include_history": query.include_history,
        "limit": query.limit,
    }


def keeper(query: RecentQuery) -> Callable[[Entry], bool] | None:
    """The author filters the client applies itself (the endpoint filters by principal only), or None."""
    if query.author is None and "/" not in (query.exclude_author or ""):
        return None

    def keep(entry: Entry) -> bool:
        return (query.author is None or by_author(entry, query.author)) and (
            query.exclude_author is None or not by_author(entry, query.exclude_author)
        )

    return keep


def _open(
    calls: Calls,
    query: RecentQuery,
    position: str | None,
    *,
    reconnect: bool = False,
    attempt: int = 0,
    deadline: float | None = None,
    closed: Callable[[], bool] = lambda: False,
    pause: Callable[[float], object] | None = None,
    cap: float | None = None,
    failed: Callable[[str], None] | None = None,
) -> Stream | None:
    """A follow's stream, asked with the retry policy's backoff; None when the endpoint has no such route
    (a first ask: 404 or 405, or an answer that is not a stream) or the follow was closed meanwhile.

    A first ask gives up as a request does (`calls.retries` attempts within the call's deadline); a
    reconnect waits first, and keeps trying with the same backoff until `deadline` (a server that
    restarts must not end a follow; one gone for the whole deadline does). With `cap` (a persistent
    follow) a reconnect never gives up on an outage: its waits grow to `cap` seconds, each attempt has
    the call's deadline of its own, and `failed` hears why each attempt failed; a refusal still ends it.

    Raises:
        MnemoError: a refusal (401, 403, 422, ...), or no answer within the retries or the deadline.
    """
    content = dumps(follow_body(query)).encode()
    headers = {"X-Request-Id": uuid.uuid4().hex, "Accept": "text/event-stream"}
    if position is not None:
        headers["Last-Event-ID"] = position
    until: float = time.monotonic() + calls.deadline if deadline is None else deadline
    what = "reconnect the follow to" if reconnect else "reach"
    reason = "no answer"

    def again(said: float | None = None) -> bool:
        nonlocal attempt, until
        if not reconnect and attempt >= calls.retries:
            return False
        wait = min(calls.max_wait, said) if said is not None else calls._delay(attempt)
        if cap is not None:
            wait = min(wait, cap)
            if failed is not None and attempt:
                failed(reason)
            until = time.monotonic() + wait + calls.deadline  # the next attempt's own
        elif time.monotonic() + wait >= until:
            return False
        (pause or calls._sleep)(wait)
        attempt += 1
        return not closed()

    if reconnect and not again():
        if closed():
            return None
        raise Unavailable(f"cannot {what} {calls.identity} within the deadline of {calls.deadline:g} s")
    while True:
        try:
            stream = calls._client.open_stream("POST", PATH, content, headers, until, idle=IDLE_SECONDS)
        except DeadlinePassed:
            reason = "no answer within the deadline"
            if cap is not None and again():
                continue
            if closed():
                return None
            raise Unavailable(f"cannot {what} {calls.identity} within the deadline of {calls.deadline:g} s") from None
        except TransportError as exc:
            reason = exc.reason
            once = exc.final and not reconnect  # a first ask to a host name that does not resolve is not repeated
            if not once and again():
                continue
            if closed():
                return None
            after = "; not asked again: check the endpoint's host" if once else f" after {attempt + 1} attempt(s)"
            ask = "" if once else "; is the server up?"
            raise Unavailable(f"cannot {what} {calls.identity} ({reason}){after}{ask}") from None
        status = stream.status_code
        if status == 200 and stream.headers.get("content-type", "").startswith("text/event-stream"):
            return stream
        try:
            answer: Answer | None = stream.read(until, MAX_REFUSAL)
        except TransportError:
            answer = None
        finally:
            stream.close()
        if status in (404, 405) or status == 200:
            if reconnect:
                raise Unavailable(f"{calls.identity} no longer offers the follow (HTTP {status})")
            return None  # no push channel here (the hosted service): the caller polls
        reason = f"HTTP {status}"
        if answer is None:
            if again():
                continue
            raise Unavailable(f"{calls.identity} answered the follow with HTTP {status} and no readable body")
        problem = error_of(answer)
        said = said_retryable(answer)
        transient = said if said is not None else (problem.retryable or status in TRANSIENT_STATUS)
        if transient and status in NOT_PROCESSED_STATUS | TRANSIENT_STATUS and again(retry_after(answer)):
            continue
        if closed():
            return None
        raise problem


def follow(calls: Calls, query: RecentQuery, position: str | None) -> RemoteFollow | None:
    """The follow of `RemoteBackend.follow`: opened now (refusals raise here), None without the channel."""
    query = query.validated()
    first = _open(calls, query, position)
    if first is None:
        return None
    return RemoteFollow(calls, query, keeper(query), first, position)
