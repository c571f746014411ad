"""Provides the bounds at the HTTP edge of `mnemo serve` (docs/security.md, "The HTTP edges"): uvicorn's h11
protocol with its header-size limit, a deadline for a request's headers, and a cap on open connections.

Why a subclass of uvicorn's h11 protocol (the one place `mnemo serve` reaches past uvicorn's settings): the
four edges below happen before or outside any ASGI request, where no app can act. Everything else is
uvicorn's public settings. uvicorn is pinned to the minor version this is tested on (pyproject.toml).

httptools, uvicorn's default, bounds neither a header's size nor the time to receive the headers. h11
bounds the size (`h11_max_incomplete_event_size`, answered here with 431 instead of uvicorn's 400); the
deadline (watched by the server's one `Deadlines` timer), the cap (503, retryable, instead of uvicorn's
`limit_concurrency` plain text) and a stalled stream's abort are this subclass, which parses nothing itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from mnemo_tui.errors import MnemoError, Unavailable
from mnemo_tui.server.deadlines import Deadlines
from mnemo_tui.server.envelope import Refused, error
from mnemo_tui.values.model import Value

MAX_HEADER_BYTES = 16 << 10  # the request line and headers together (h11's own default)
HEADER_SECONDS = 10.0  # to send a request's headers, from the connection's start or the last answer
KEEP_ALIVE_SECONDS = 5  # an idle connection after an answer (uvicorn's `timeout_keep_alive`)
MAX_CONNECTIONS = 1000  # open at once, pushed follows included (docs/security.md has the budget)
SEND_SECONDS = 30.0  # an answer whose client takes nothing of it for this long is dropped (as a stream's part)
LINGER_SECONDS = 1.0  # a refused connection is read and dropped this long at most before it is closed
MAX_LINGERING = 100  # refused connections lingering at once; past it one is closed at once
SENDING = "sending"  # with a connection: its send deadline's key among the server's deadlines


class Edges(Value):
    """The bounds of one server's connections."""

    max_connections: int = MAX_CONNECTIONS
    header_seconds: float = HEADER_SECONDS
    max_header_bytes: int = MAX_HEADER_BYTES
    keep_alive_seconds: int = KEEP_ALIVE_SECONDS
    send_seconds: float = SEND_SECONDS

    def uvicorn_options(self, deadlines: Deadlines | None = None) -> dict[str, Any]:
        """The `uvicorn.Config` arguments that put these bounds in place; the header deadlines are watched by
        `deadlines` (the app's, so that one timer watches the server's every deadline)."""
        watch = Deadlines() if deadlines is None else deadlines
        protocol = type("BoundedH11", (BoundedH11,), {"edges": self, "deadlines": watch})
        return {
            "http": protocol,
            "h11_max_incomplete_event_size": self.max_header_bytes,
            "timeout_keep_alive": self.keep_alive_seconds,
        }


class HeaderBound(h11.Connection):
    """h11's server connection with its header bound on whole headers too: h11 bounds only headers still
    arriving, so a block that came whole in one read passed at any size up to the read's."""

    def __init__(self, max_header_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_header_bytes)
        self.max_header_bytes = max_header_bytes
        self.too_large = False

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.too_large = exc.error_status_hint == 431
            raise
        if isinstance(event, h11.Request) and _size(event) > self.max_header_bytes:
            self.too_large = True
            raise h11.RemoteProtocolError("request headers too large", error_status_hint=431)
        return event


def _size(request: h11.Request) -> int:
    # The request line and header lines as sent, give or take their spaces and line ends.
    return len(request.method) + len(request.target) + 12 + sum(len(n) + len(v) + 4 for n, v in request.headers)


class BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with the header deadline, the send deadline, the connection cap and 431 for
    oversized headers.

    The header deadline covers only the wait for a request's headers: a request being answered (a long
    body, a pushed follow) is bounded by the app, and the deadline starts again after its answer. The send
    deadline holds whenever the transport holds more unsent answer than its high-water mark (a whole answer
    written at once, or a stream): nothing taken for `send_seconds` drops the connection.
    """

    edges: Edges
    deadlines: Deadlines
    refused = False  # over the cap: answered 503 and never handed to uvicorn
    _sent_left = 0  # bytes the transport held unsent when the send deadline was set
    count_refusal: Callable[[int], None] = staticmethod(lambda status: None)  # the metrics' (server/run.py)
    lingering = 0  # refused connections not closed yet, over the whole server

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn: HeaderBound = HeaderBound(self.edges.max_header_bytes)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.edges.max_connections:
            self._refuse(transport)
            return
        super().connection_made(transport)
        self.deadlines.expect(self, self.edges.header_seconds, self.headers_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self.deadlines.drop(self)
        self.deadlines.drop((self, SENDING))
        if self.refused:  # uvicorn never knew it
            type(self).lingering -= 1
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:  # what it sends is read and dropped until it closes
            return
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        scope = getattr(self, "scope", None)
        if scope is not None and "mnemo.abort" not in scope:
            # A stream whose client stopped reading is dropped (its unsent bytes may never drain), not closed.
            scope["mnemo.abort"] = self.transport.abort

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self.deadlines.expect(self, self.edges.header_seconds, self.headers_late)

    def pause_writing(self) -> None:
        # The transport holds more than its high-water mark of unsent answer (a client reading slowly, or not
        # at all): from now on it must take something within the send deadline, whatever the answer.
        super().pause_writing()
        self._sent_left = self.transport.get_write_buffer_size()
        self.deadlines.expect((self, SENDING), self.edges.send_seconds, self.send_late)

    def resume_writing(self) -> None:
        super().resume_writing()
        self.deadlines.drop((self, SENDING))

    def send_late(self) -> None:
        """The send deadline passed: a client that took something meanwhile gets another; one that took
        nothing is dropped (aborted: the unsent bytes are freed, where a close would keep them until sent)."""
        left = self.transport.get_write_buffer_size()
        if 0 < left < self._sent_left:
            self._sent_left = left
            self.deadlines.expect((self, SENDING), self.edges.send_seconds, self.send_late)
        elif left:
            self.transport.abort()

    def headers_late(self) -> None:
        """The deadline passed: a connection answering nothing is closed, with 408 when it had begun a request."""
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return  # gone, or a request is being answered (the app bounds that)
        begun = self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE and self.conn.trailing_data[0]
        if begun:
            seconds = f"{self.edges.header_seconds:g}"
            late = Refused(408, "REQUEST_TIMEOUT", f"the request headers did not arrive within {seconds} s")
            self._answer(late)
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers every malformed request with 400; headers past the bound are 431.
        if self.conn.too_large:
            limit = self.edges.max_header_bytes
            self._answer(Refused(431, "HEADERS_TOO_LARGE", f"the request line and headers are over {limit} bytes"))
            self.transport.close()
            return
        super().send_400_response(msg)

    def _answer(self, exc: MnemoError) -> None:
        answer = error(exc, None)
        self.count_refusal(answer.status_code)
        headers = [*answer.raw_headers, (b"connection", b"close")]
        reason = HTTPStatus(answer.status_code).phrase.encode()
        start = h11.Response(status_code=answer.status_code, headers=headers, reason=reason)
        for event in (start, h11.Data(data=bytes(answer.body))):
            self.transport.write(self.conn.send(event))
        self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")

    def _refuse(self, transport: asyncio.Transport) -> None:
        """Over the cap: 503 at once, then the connection's input is read and dropped for a moment before
        it is closed (closing with unread input would reset it, and the client could lose the 503)."""
        self.transport, self.refused = transport, True
        type(self).lingering += 1
        self._answer(Unavailable(f"the server holds {self.edges.max_connections} connections already; retry shortly"))
        if self.lingering > MAX_LINGERING or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER_SECONDS, transport.close)
