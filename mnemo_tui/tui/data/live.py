"""Provides live tracking for the TUI: the walk layer's `LiveTracker` (shared with `mnemo recent --follow`), and
`PushHandle`, one feed generation's push follow as the app's thread sees it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from textual.message import Message

from mnemo_tui.backends import Backend
from mnemo_tui.catchup.walk import LIVE_PAGES, LiveBatch, LiveTracker, Probe
from mnemo_tui.tui import messages as msg
from mnemo_tui.values.follow import Follow, Pushed
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.removals import Removals

__all__ = ["LIVE_PAGES", "LiveBatch", "LiveTracker", "Probe", "PushHandle", "open_push", "read_push"]


class PushHandle:
    """The follow a feed's push thread reads: `close()` from the app's thread ends it, whenever it comes.

    The thread opens the follow itself (opening is a request), so the app may close the handle before
    there is a follow to close: `attach` then closes it at once and tells the thread to stop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._follow: Follow | None = None
        self.closed = False

    def attach(self, follow: Follow) -> bool:
        """Hand over the follow the thread opened; False (and the follow closed) when the handle was closed."""
        with self._lock:
            if not self.closed:
                self._follow = follow
                return True
        follow.close()
        return False

    def close(self) -> None:
        with self._lock:
            self.closed = True
            follow, self._follow = self._follow, None
        if follow is not None:
            follow.close()  # shuts its connection down: the thread's waiting read returns, and it ends


def open_push(
    backend: Backend, generation: int, query: RecentQuery, after: int | None, post: Callable[[Message], object]
) -> PushHandle:
    """Read a feed generation's push follow in a thread of its own (`read_push`); `close()` its handle to end it.

    A plain daemon thread, not a Textual worker: a worker runs on the event loop's executor, which
    the loop waits for when it closes, and the app counts workers as reads in flight; a follow
    never ends by itself.
    """
    push = PushHandle()
    args = (push, backend, generation, query, after, post)
    threading.Thread(target=read_push, args=args, name="mnemo-follow", daemon=True).start()
    return push


def read_push(
    push: PushHandle,
    backend: Backend,
    generation: int,
    query: RecentQuery,
    after: int | None,
    post: Callable[[Message], object],
) -> None:
    """A feed's push thread: each event posted as a live poll's result is (`LiveFound`: the same code shows
    it), a dropped stream as `PushDropped` while the follow reconnects, then `PushEnded` (unless the feed
    closed the handle: it has moved on)."""
    try:
        follow = backend.follow(query)
    except Exception as exc:  # noqa: BLE001 - a failing follow falls back to polling; it never closes the app
        post(msg.PushEnded(generation, msg.as_error(exc)))
        return
    if follow is None:
        post(msg.PushEnded(generation, None, offered=False))
        return
    if not push.attach(follow):
        return

    def outage(why: str | None) -> None:
        # A reconnect's first event says live again by itself; the drop is said at once.
        if why is not None and not push.closed:
            post(msg.PushDropped(generation, why))

    follow.on_connection = outage
    error = None
    try:
        for event in follow:
            if push.closed:
                break
            post(_found(backend, generation, event, query.scope, after))
            after = None
    except Exception as exc:  # noqa: BLE001 - as above
        error = msg.as_error(exc)
    finally:
        follow.close()
    if not push.closed:
        post(msg.PushEnded(generation, error))


def _found(backend: Backend, generation: int, event: Pushed, scope: str | None, after: int | None) -> msg.LiveFound:
    """One pushed event as a live result; the first also carries the removals since the first page's read
    (`after`), which the follow, reporting only those after its own start, cannot."""
    removals, asked = None, False
    if event.kind == "removed":
        removals, asked = Removals(event.removals, gone=False), True
    elif after is not None:
        try:
            removals, asked = backend.removals(scope, after), True
        except Exception:  # noqa: BLE001 - the next removal pushed, or a poll, says it again
            pass
    batch = LiveBatch(event.entries, overflow=False) if event.kind == "entries" else None
    return msg.LiveFound(generation, batch, removals, asked, pushed=True)
