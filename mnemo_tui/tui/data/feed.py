"""Provides `FeedData`: one feed's rows and what is live in them, without Textual (the widget shows and wires it).

It holds the page window of the scope shown, the entries held as new, the polls, the push follow and
the removals seen, each for one generation (a scope, a history setting, a refresh): a result of an
older generation is dropped. Its methods run on the app's thread; the reads they ask for run on
others (`live.poll_live` in a worker, `live.read_push` in a thread of its own) and come back as news.
"""

from __future__ import annotations

from collections.abc import Set

from mnemo_tui.catchup.walk import LiveTracker
from mnemo_tui.errors import RemovalsGone
from mnemo_tui.tui.data.live import LiveFound, Poll, Post, PushDropped, PushEnded, PushHandle, open_push
from mnemo_tui.tui.data.removed import RemovalWatch
from mnemo_tui.tui.data.window import FeedWindow, PageRequest
from mnemo_tui.tui.session import Session
from mnemo_tui.values.model import Entry, Page, RecentQuery, Value
from mnemo_tui.values.removals import Removals

# New entries held while the reader is away from the top; past this the scope is re-read.
PENDING_CAP = 500
# Load the next page when the reader is this many rows from the last one known.
PREFETCH_ROWS = 40


class Removed(Value):
    """What an answer of removals did to the rows: those removed elsewhere (`elsewhere`; `count` of them were
    rows shown or held as new), how many this app's own deletes took out (`dropped`: the delete said so
    already), and how many of the rows gone were above the cursor (`above`); `reread`: removals were
    dropped unseen, so the scope must be read again instead."""

    elsewhere: frozenset[str] = frozenset()
    count: int = 0
    dropped: int = 0
    above: int = 0
    reread: bool = False


class Ended(Value):
    """What the end of the push follow changed: the status line (`changed`), or the whole feed (`reread`)."""

    changed: bool = False
    reread: bool = False


class FeedData:
    """The rows of one scope and their live state.

    Args:
        session: what to read with.
        post: hands the push follow's news to the app's thread (from that thread: the widget posts it).
    """

    def __init__(self, session: Session, post: Post) -> None:
        self.session = session
        self.post = post
        self.scope: str | None = None
        self.include_history = False
        self.generation = 0
        self.window = FeedWindow(keep_pages=session.keep_pages)
        self.tracker = LiveTracker(session.overlap)
        self.removed = RemovalWatch()
        # False once the backend answered that it keeps no tombstones (the hosted service): never asked again.
        self.tombstones = True
        self.pending: list[Entry] = []
        self.pending_overflow = False
        self.live_error: str | None = None
        # The first page failed: nothing is shown and nothing polled (live starts with a first page) until `r`.
        self.first_failed = False
        self.inflight: set[int] = set()
        self.live_busy = False
        # The push follow of the current generation (an endpoint that offers it): read by its own thread.
        self.offers_push = session.backend.kind == "remote"
        self.push: PushHandle | None = None
        self.pushing = False
        # The push's stream dropped and its follow is reconnecting (the timer still leaves it to the push).
        self.reconnecting = False
        # The words that narrow the rows shown to the loaded entries that contain them ("": all rows).
        self.filter = ""
        self.matches: list[Entry] = []

    # -- the scope and its pages ----------------------------------------------------------------

    def open(self, scope: str | None, include_history: bool) -> None:
        """A new generation for a scope: from its newest entry, anything still in flight dropped."""
        self.scope, self.include_history = scope, include_history
        self.stop_push()
        self.generation += 1
        self.window = FeedWindow(keep_pages=self.session.keep_pages)
        self.tracker = LiveTracker(self.session.overlap)
        self.removed = RemovalWatch()
        self.pending, self.pending_overflow = [], False
        self.inflight.clear()
        self.first_failed = False
        self.filter, self.matches = "", []

    def query(self, cursor: str | None = None) -> RecentQuery:
        """The feed's read of its scope (at a cursor)."""
        return RecentQuery(
            scope=self.scope, limit=self.session.page_size, cursor=cursor, include_history=self.include_history
        )

    def want(self, request: PageRequest) -> RecentQuery | None:
        """The read of a page the window wants, unless that page is already being read."""
        if request.index in self.inflight:
            return None
        self.inflight.add(request.index)
        return self.query(request.cursor)

    def page_read(self, generation: int, index: int, page: Page, token: tuple[int, int] | None) -> Page | None:
        """Take a page read for `index` (`token`: the change probe taken before the first page); returns it as
        held (without the entries removed since), or None when it is stale (another generation, or no fit)."""
        if generation != self.generation:
            return None
        self.inflight.discard(index)
        first = index == 0 and not self.window.started
        if first:
            self.tracker.token = token
        if self.removed.ids:  # read before a removal the feed has already seen
            page = page.replace(items=self.removed.keep(page.items))
        if not self.window.add_page(index, page):
            return None
        self.tracker.observe(page.items)
        if first:
            self.removed.start(page.items)
            self.start_push()
        return page

    def page_failed(self, generation: int, index: int) -> bool:
        """Note a failed page read; False when it is stale."""
        if generation != self.generation:
            return False
        self.inflight.discard(index)
        self.first_failed = not self.window.started
        return True

    def needs(self, top: int, bottom: int) -> list[PageRequest]:
        """The pages rows `top..bottom` on screen need: evicted ones among them, or the next one near the end."""
        if self.filter:
            return []  # the filter narrows what is loaded; `enter` asks the server
        wanted = self.window.missing(top, bottom)
        nxt = self.window.next_request()
        if nxt is not None and self.window.started and bottom + PREFETCH_ROWS >= self.window.row_count:
            wanted.append(nxt)
        return wanted

    # -- the rows shown: the window, or the loaded entries that match the filter -----------------

    @property
    def row_count(self) -> int:
        return len(self.matches) if self.filter else self.window.row_count

    def entry_at(self, row: int) -> Entry | None:
        """The entry shown at a row (None while its page is loading)."""
        if self.filter:
            return self.matches[row] if 0 <= row < len(self.matches) else None
        return self.window.entry(row)

    def set_filter(self, value: str) -> None:
        """Show only the loaded entries whose text, author, domain or id contain `value` (any case)."""
        self.filter = value.strip().casefold()
        self.matches = []

    def refilter(self) -> None:
        """The matches again, from the entries loaded now."""
        if self.filter:
            wanted, window = self.filter, self.window
            loaded = [*window.head, *(e for slot in window.slots for e in slot.items or ())]
            self.matches = [
                e for e in loaded if wanted in f"{e.content}\n{e.author}\n{e.domain}\n{e.atom_id}".casefold()
            ]

    # -- live: polls ------------------------------------------------------------------------------

    def tick(self) -> Poll | None:
        """The timer's live check: a poll, unless the push follow brings what is new."""
        return None if self.pushing else self.check_live()

    def check_live(self) -> Poll | None:
        """The poll to run (one at a time; none before the first page has arrived)."""
        if self.live_busy or not self.window.started:
            return None
        self.live_busy = True
        # Removals are asked for only with something shown to drop, and of a backend that keeps them.
        after = self.removed.after if self.tombstones else None
        return Poll(self.generation, self.tracker, self.scope, self.include_history, after)

    def found(self, news: LiveFound) -> bool:
        """Note what a poll or the push found, of any generation: whether the status line changed (live
        pushed again, or live paused, resumed or paused for another reason)."""
        changed = False
        if not news.pushed:
            self.live_busy = False
        elif news.generation == self.generation and (self.reconnecting or not self.pushing):
            self.pushing, self.reconnecting, changed = True, False, True  # the status line says `live (pushed)`
        error = None if news.error is None else news.error.message
        if self.live_error != error:
            self.live_error, changed = error, True
        return changed

    def arrivals(self, news: LiveFound) -> list[Entry] | None:
        """The entries new to the feed in a result of this generation, now held as new; None when none came
        (nor too many: `pending_overflow` then says the scope is to be read again)."""
        batch = news.batch
        if batch is None:
            return None
        # A poll and the push may both bring an entry: what was shown meanwhile is dropped here.
        entries = self.tracker.take(batch.entries)
        if not entries and not batch.overflow:
            return None
        self.removed.start(entries)
        self.pending[:0] = entries
        self.pending_overflow = self.pending_overflow or batch.overflow or len(self.pending) > PENDING_CAP
        del self.pending[PENDING_CAP:]
        return entries

    def show_pending(self) -> bool:
        """Put the entries held as new on top of the rows; False when none were held."""
        if not self.pending:
            return False
        self.window.prepend(self.pending)
        self.pending = []
        return True

    # -- live: removals ---------------------------------------------------------------------------

    def removals(self, removals: Removals | None, cursor: int = 0) -> Removed | None:
        """Drop the rows an answer of removals removed (None: the backend keeps no tombstones), the row at
        `cursor` counted from; None when nothing new was removed."""
        if removals is None:
            self.tombstones = False
            return None
        ids = self.removed.take(removals)
        if ids is None:
            return Removed(reread=True)
        if not ids:
            return None
        # This app's own deletes (`d`) leave the feed as well, but are no removal elsewhere: the delete said so.
        here = ids & self.session.deleted_here
        elsewhere = frozenset(ids - here)
        above = sum(1 for row in range(cursor) if (e := self.entry_at(row)) is not None and e.atom_id in ids)
        return Removed(elsewhere, self._drop(elsewhere), self._drop(here), above)

    def _drop(self, ids: Set[str]) -> int:
        """Take these entries out of the rows and of those held as new; returns how many went."""
        held = len(self.pending)
        self.pending = [e for e in self.pending if e.atom_id not in ids]
        return self.window.drop(set(ids)) + held - len(self.pending)

    # -- live: the push follow of an endpoint, read by a thread of its own ----------------------

    def start_push(self) -> None:
        """Over an endpoint that offers the push follow, read it for this generation in a thread of its own
        (`live.open_push`); `stop_push` (a new generation, the feed unmounted) closes its connection."""
        if not self.offers_push or self.push is not None or not self.window.started:
            return
        query = self.tracker.query(self.query())
        after = self.removed.after if self.tombstones else None
        self.push = open_push(self.session.backend, self.generation, query, after, self.post)

    def stop_push(self) -> None:
        push, self.push = self.push, None
        self.pushing = self.reconnecting = False
        if push is not None:
            push.close()

    def resume_push(self, news: LiveFound) -> None:
        """After a poll that succeeded, the push again if it had failed (the endpoint answers again)."""
        if not news.pushed and news.error is None and self.offers_push and self.push is None:
            self.start_push()

    def push_ended(self, news: PushEnded) -> Ended:
        """Note the end of the push follow's thread: the timer's poll takes over (and retries a failed push)."""
        if news.generation != self.generation:
            return Ended()
        changed = self.pushing
        self.push, self.pushing, self.reconnecting = None, False, False
        if not news.offered:
            self.offers_push = False  # this backend has no push: the timer's poll it is
            return Ended(changed)
        if isinstance(news.error, RemovalsGone):
            return Ended(changed, reread=True)  # resumed past the removals kept: read again
        if news.error is not None and self.live_error != news.error.message:
            self.live_error, changed = news.error.message, True  # live pauses
        return Ended(changed)

    def push_dropped(self, news: PushDropped) -> bool:
        """Note that the push's stream dropped and its follow reconnects: whether the status line changed."""
        if news.generation == self.generation and self.push is not None and not self.reconnecting:
            self.reconnecting = True  # the status line stops saying `live (pushed)` until the next event
            return True
        return False
