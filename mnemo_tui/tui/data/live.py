"""Provides a feed's live reads without Textual: one poll (`poll_live`, run by a worker thread), one feed
generation's push follow (`PushHandle`, read by a thread of its own), and what either found (`LiveNews`),
which the feed widget hands to `FeedData` (`tui/data/feed.py`). The walk layer's `LiveTracker` is shared
with `mnemo recent --follow`."""

from __future__ import annotations

import threading
from collections.abc import Callable

from mnemo_tui.backends import Backend
from mnemo_tui.catchup.walk import LIVE_PAGES, LiveBatch, LiveTracker, Probe
from mnemo_tui.errors import MnemoError
from mnemo_tui.tui.data.errors import as_error
from mnemo_tui.tui.session import Session
from mnemo_tui.values.follow import Follow, Pushed
from mnemo_tui.values.model import RecentQuery, Value
from mnemo_tui.values.removals import Removals

__all__ = [
    "LIVE_PAGES",
    "LiveBatch",
    "LiveFound",
    "LiveNews",
    "LiveTracker",
    "Poll",
    "Probe",
    "PushDropped",
    "PushEnded",
    "PushHandle",
    "open_push",
    "poll_live",
    "read_push",
]


class LiveFound(Value):
    """A poll's (or the push follow's) new entries (None: nothing changed, or their read failed), the removals
    since the bound when it asked (`asked`; None: the backend keeps no tombstones), and what failed (`error`:
    live is paused); `pushed`: from the push follow's thread, not a poll (no poll in flight to end)."""

    generation: int
    batch: LiveBatch | None
    removals: Removals | None = None
    asked: bool = False
    error: MnemoError | None = None
    pushed: bool = False


class PushEnded(Value):
    """The push follow's thread ended: `offered` False when the backend has no push (the feed polls), else
    why it failed (`error`; None when it was closed or the stream ended cleanly)."""

    generation: int
    error: MnemoError | None
    offered: bool = True


class PushDropped(Value):
    """The push follow's stream ended or dropped (`why`) and it is reconnecting: nothing is pushed until its next event."""

    generation: int
    why: str


LiveNews = LiveFound | PushEnded | PushDropped
# How a thread hands its news to the app's thread (the widget posts it as a message).
Post = Callable[[LiveNews], object]


class Poll(Value):
    """One live poll, as the feed asked for it on the app's thread: its generation, the generation's tracker,
    what it reads, and the bound of the removals to ask for (None: none asked)."""

    generation: int
    tracker: LiveTracker
    scope: str | None
    include_history: bool
    after: int | None


def poll_live(session: Session, poll: Poll) -> LiveFound:
    """Read what is new since the last poll, then the removals since the bound (a worker thread's body)."""
    backend = session.backend
    batch, removals, error = None, None, None
    try:
        if not poll.tracker.changed(session.probe):
            return LiveFound(poll.generation, None)
        batch = poll.tracker.poll(backend, poll.scope, poll.include_history)
    except Exception as exc:  # noqa: BLE001 - a failing poll pauses live updates; it never closes the app
        error = as_error(exc)
    # After the entries: an entry written and removed between two polls is dropped in the same one. Asked
    # even when they failed: a room deleted elsewhere refuses its feed but tells its former members so.
    asked = poll.after is not None
    if poll.after is not None:
        try:
            removals = backend.removals(poll.scope, poll.after)
        except Exception as exc:  # noqa: BLE001 - as above
            asked, error = False, error or as_error(exc)
    return LiveFound(poll.generation, batch, removals, asked, error)


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


def open_push(backend: Backend, generation: int, query: RecentQuery, after: int | None, post: Post) -> PushHandle:
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
    post: Post,
) -> None:
    """A feed's push thread: each event posted as a live poll's result is (`LiveFound`: the same code shows
    it), a dropped stream as `PushDropped` while the follow reconnects, then `PushEnded` (unless the feed
    closed the handle: it has moved on)."""
    try:
        follow = backend.follow(query)
    except Exception as exc:  # noqa: BLE001 - a failing follow falls back to polling; it never closes the app
        post(PushEnded(generation, as_error(exc)))
        return
    if follow is None:
        post(PushEnded(generation, None, offered=False))
        return
    if not push.attach(follow):
        return

    def outage(why: str | None) -> None:
        # A reconnect's first event says live again by itself; the drop is said at once.
        if why is not None and not push.closed:
            post(PushDropped(generation, why))

    follow.on_connection = outage
    error = None
    try:
        for event in follow:
            if push.closed:
                break
            post(_found(backend, generation, event, query.scope, after))
            after = None
    except Exception as exc:  # noqa: BLE001 - as above
        error = as_error(exc)
    finally:
        follow.close()
    if not push.closed:
        post(PushEnded(generation, error))


def _found(backend: Backend, generation: int, event: Pushed, scope: str | None, after: int | None) -> LiveFound:
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
    return LiveFound(generation, batch, removals, asked, pushed=True)
