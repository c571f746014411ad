"""Provides the one walk of the feed: follow cursors to the end, drop what is held, know what is new."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from operator import attrgetter

from mnemo_tui.backends import Backend
from mnemo_tui.errors import BrokenFeed
from mnemo_tui.limits import MAX_LIMIT
from mnemo_tui.values.model import Entry, Page, RecentQuery, Value, WalkProgress, Watermark
from mnemo_tui.values.text_page import TextPage

# How far below a watermark a pass re-reads on an endpoint, whose database may let a transaction
# that took an earlier timestamp commit after a later one (docs/architecture.md). The embedded engine's
# clock makes such a late commit impossible, so it re-reads nothing.
REMOTE_OVERLAP = 2_000_000
# Pages in a row with a cursor but no entry before a walk is declared stuck (a page may be short,
# even empty, and still carry a cursor; an endless run of them is a feed that never advances).
MAX_EMPTY_PAGES = 1000
_ATOM_ID = attrgetter("atom_id")
_CREATED_AT = attrgetter("created_at")
_WIRE = attrgetter("wire")


def default_overlap(backend: Backend) -> int:
    """The overlap a walk of this backend re-reads below its low bound, in microseconds."""
    return REMOTE_OVERLAP if backend.kind == "remote" else 0


class Mark(Value):
    """Where a reader stands in a scope: the newest instant it holds, and the ids it holds at or just below it."""

    created_at: int | None = None
    ids: frozenset[str] = frozenset()

    @staticmethod
    def of(watermark: Watermark | None) -> Mark:
        """A consumer's watermark as a mark (none: the reader holds nothing)."""
        if watermark is None:
            return Mark()
        return Mark(watermark.created_at, frozenset(watermark.boundary_ids))


class Start(Value):
    """What is new to a reader: entries at or after `since` whose ids it does not already hold."""

    since: int | None
    held: frozenset[str]

    def is_new(self, created_at: int, atom_id: str) -> bool:
        """Whether one entry is new to the reader (the rule `catchup`, the TUI's counts and marks share)."""
        return (self.since is None or created_at >= self.since) and atom_id not in self.held


def start_of(mark: Mark, overlap: int, since: int | None = None) -> Start:
    """Where a pass from `mark` reads: `overlap` below the mark's instant, the mark's ids held.

    `since` (a first pass's low bound) narrows the read: with a mark, the later of the two is used.
    """
    if mark.created_at is None:
        return Start(since, frozenset())
    low = mark.created_at - overlap
    return Start(low if since is None else max(since, low), mark.ids)


def unread(watermark: Watermark | None, overlap: int) -> Start:
    """What is new to a consumer with this watermark: the one rule of `catchup`, the TUI's counts and marks."""
    return start_of(Mark.of(watermark), overlap)


class Frontier:
    """The newest instant seen, and the ids seen within `overlap` below it: what a reader holds at the top.

    Entries may be observed in any order; ids whose time is not known (restored from a
    checkpoint) count as seen at the newest instant.
    """

    def __init__(self, overlap: int, newest: int | None = None, ids: Iterable[str] = ()) -> None:
        self.overlap = overlap
        self.newest = newest
        self._ids: dict[str, int] = {} if newest is None else dict.fromkeys(ids, newest)

    def observe(self, created_at: int, atom_id: str) -> None:
        if self.newest is None or created_at > self.newest:
            self.newest = created_at
            low = created_at - self.overlap
            self._ids = {i: t for i, t in self._ids.items() if t >= low}
        if created_at >= self.newest - self.overlap:
            self._ids[atom_id] = created_at

    def observe_page(self, newest: int | None, page: Page | TextPage) -> None:
        """`observe` each entry of a page whose newest instant is `newest`; a page wholly below the overlap (every
        page of a long walk but its first few) changes nothing, which that one look tells (its entries unbuilt)."""
        if newest is None or (self.newest is not None and newest < self.newest - self.overlap):
            return
        for entry in page.items:
            self.observe(entry.created_at, entry.atom_id)

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids at or within the overlap below the newest instant, in the order they were seen."""
        return tuple(self._ids)

    def mark(self) -> Mark:
        return Mark(self.newest, frozenset(self._ids))


class Walk:
    """Every cursor loop of mnemo: one query followed from page to page until no cursor comes back.

    It yields each page's fresh entries (the ids the reader already holds are dropped and counted
    as repeats), tracks the newest instant and the ids near it (the next watermark's boundary
    ids), and stops a feed whose cursor does not advance with `BrokenFeed`. Memory stays flat: it
    remembers the held ids, the previous page's ids (a repeat at a page boundary is dropped too)
    and the ids near the newest instant, unless `hold_all` asks it to hold every id it yields.

    Args:
        backend: what to read.
        query: the scope, filters, low bound and page size (its cursor, if any, is where to begin).
        held: ids the reader already holds (a watermark's boundary ids).
        overlap: microseconds below the newest instant whose ids are tracked (see `default_overlap`).
        hold_all: also drop any id yielded before (a verifier that must see a repeat anywhere).
        on_repeat: called with every entry dropped.
        progress: where a resumed walk stands (from a checkpoint).
        max_pages: stop after this many requests (the walk then is not `done`).
    """

    def __init__(
        self,
        backend: Backend,
        query: RecentQuery,
        *,
        held: Iterable[str] = (),
        overlap: int = 0,
        hold_all: bool = False,
        on_repeat: Callable[[Entry], None] | None = None,
        progress: WalkProgress | None = None,
        max_pages: int | None = None,
    ) -> None:
        self.backend = backend
        self.query = query.validated()
        self.held = set(held)
        self.overlap = overlap
        self.hold_all = hold_all
        self.on_repeat = on_repeat
        start = progress if progress is not None else WalkProgress(cursor=query.cursor)
        self._progress: WalkProgress | None = start
        # The progress's counts, moved on a page at a time; the `WalkProgress` is built from them only when
        # something reads it (a checkpoint), not for each of a long walk's pages.
        self._cursor, self._done, self._pages = start.cursor, start.done, start.pages
        self._delivered, self._repeats = start.delivered, start.repeats
        self.frontier = Frontier(overlap, start.newest, start.newest_ids)
        self.max_pages = max_pages
        self._previous: frozenset[str] = frozenset()
        self._last: tuple[int, str] | None = None
        self._empty = 0

    @property
    def progress(self) -> WalkProgress:
        """Where the walk stands: the cursor of the next page, whether it is done, the frontier, the counts."""
        if self._progress is None:
            self._progress = WalkProgress(
                self._cursor,
                self._done,
                self.frontier.newest,
                self.frontier.ids,
                self._pages,
                self._delivered,
                self._repeats,
            )
        return self._progress

    def pages(self) -> Iterator[list[Entry]]:
        """Each page's fresh entries, newest first (a page may have none), until the end of the feed.

        A walk without `max_pages` reads the backend's stream of pages where it has one
        (`Backend.walk_pages`: one streamed answer from `mnemo serve`), every page held to the same
        checks; else, and with `max_pages`, it asks for each page (`Backend.recent`).
        """
        read = self._read()
        try:
            for page, used in read:
                fresh = self._taken(page, used)
                yield list(page.items) if fresh is None else fresh
        finally:
            read.close()  # a walk left early (`| head`) lets go of the answer at once

    def texts(self) -> Iterator[list[str] | TextPage]:
        """What `pages` yields, as wire texts: a page every entry of which is fresh, and that came as its items'
        texts (`TextPage`), as it is (printed whole, its `Entry` values never built); else the fresh entries' texts."""
        read = self._read()
        try:
            for page, used in read:
                fresh = self._taken(page, used)
                if fresh is None and isinstance(page, TextPage):
                    yield page
                else:
                    yield list(map(_WIRE, page.items if fresh is None else fresh))
        finally:
            read.close()

    def _read(self) -> Generator[tuple[Page | TextPage, str | None], None, None]:
        """Each page as it is read, with the cursor it was read from; the caller takes it (`_taken`) before the next."""
        requests = 0
        streamed = self.max_pages is None
        while not self._done and (self.max_pages is None or requests < self.max_pages):
            used = self._cursor
            stream = self.backend.walk_pages(self.query.replace(cursor=used)) if streamed else None
            if stream is None:
                requests += 1
                yield self.backend.recent(self.query.replace(cursor=used)), used
                continue
            streamed = False  # a stream that ends before the end of the feed is followed by pages
            try:
                for page in stream:
                    yield page, self._cursor
                    if self._done:
                        break
            finally:
                stream.close()  # a walk left early (`| head`) lets go of the answer at once

    def _taken(self, page: Page | TextPage, used: str | None) -> list[Entry] | None:
        """One page read from `used` (a cursor, None at the top): checked, the progress moved on; its fresh
        entries, or None when every entry of the page is fresh (most pages of a walk)."""
        number = self._pages + 1
        if isinstance(page, TextPage):
            ids, last, newest = page.ids, page.last, page.newest
        else:
            ids = list(map(_ATOM_ID, page.items))
            last = (page.items[-1].created_at, page.items[-1].atom_id) if page.items else None
            newest = max(map(_CREATED_AT, page.items)) if page.items else None
        self._advanced(last, used, page.next_cursor, number)
        fresh: list[Entry] | None = None
        repeats = 0
        here = frozenset(ids)  # each id hashed once, for the three looks below
        if not (self.held.isdisjoint(here) and self._previous.isdisjoint(here) and not self.hold_all):
            fresh = []
            for entry in page.items:
                atom = entry.atom_id
                if atom in self.held or atom in self._previous:
                    repeats += 1
                    if self.on_repeat is not None:
                        self.on_repeat(entry)
                else:
                    fresh.append(entry)
                    if self.hold_all:
                        self.held.add(atom)
        self.frontier.observe_page(newest, page)
        self._previous = here
        self._cursor, self._done, self._pages = page.next_cursor, page.next_cursor is None, number
        self._delivered += len(ids) if fresh is None else len(fresh)
        self._repeats += repeats
        self._progress = None
        return fresh

    def _advanced(self, last: tuple[int, str] | None, used: str | None, cursor: str | None, number: int) -> None:
        """Raise `BrokenFeed` unless the page moved the walk on: its last entry (`last`) strictly older than the
        previous page's last (the feed's order, docs/architecture.md), its cursor a new one."""
        why = None
        if cursor is not None and cursor == used:
            why = "the same cursor again"
        elif last is not None:
            last = (last[0], last[1].lower())
            if self._last is not None and not last < self._last:
                why = "a page that is not older than the one before"
            self._last, self._empty = last, 0
        elif cursor is not None:
            self._empty += 1
            if self._empty > MAX_EMPTY_PAGES:
                why = f"{self._empty} empty pages in a row"
        if why is not None:
            raise BrokenFeed(
                f"the walk looped: it was still handed a cursor after page {number} that does not advance "
                f"({why}); the backend breaks the feed contract, and nothing was committed"
            )


def stream_wire(backend: Backend, query: RecentQuery) -> Generator[list[str] | TextPage, None, None]:
    """Every remaining entry of a read as wire texts, in chunks, newest first: lists of texts, or pages as their
    items' texts came (`TextPage`: printed as they are).

    From one snapshot where the backend can read one (the embedded store: one statement), else
    by the walk, in the largest pages there are (`Walk.texts`).
    """
    snapshot = backend.snapshot_wire(query.validated())
    if snapshot is not None:
        yield from snapshot
        return
    for chunk in Walk(backend, query.replace(limit=MAX_LIMIT)).texts():
        if len(chunk):
            yield chunk


# -- live tracking: what is newer than the newest entry shown (the TUI's live feed, `recent --follow`) --

LIVE_PAGES = 5

Probe = Callable[[], tuple[int, int] | None]


class LiveBatch(Value):
    """New entries found by one poll (newest first); `overflow` when there were too many to hold."""

    entries: list[Entry]
    overflow: bool


class LiveTracker:
    """The newest instant shown and the ids shown at (or, on an endpoint, within the overlap below) it.

    A poll reads from there, inclusive, and drops what is shown: an entry is never shown twice,
    and a late commit inside the overlap is not missed. Nothing at or below the oldest entry
    shown (the floor) counts as new: reading on by cursor reaches it.

    Args:
        overlap: the walk's overlap for this backend (see `walk.default_overlap`).
    """

    def __init__(self, overlap: int = 0) -> None:
        self.overlap = overlap
        self.frontier = Frontier(overlap)
        self.floor: tuple[int, str] | None = None
        self.token: tuple[int, int] | None = None

    @property
    def newest(self) -> int | None:
        """The newest instant shown."""
        return self.frontier.newest

    @property
    def ids_at_newest(self) -> set[str]:
        """The ids shown at the newest instant (and, with an overlap, within it below)."""
        return set(self.frontier.ids)

    def observe(self, entries: list[Entry]) -> None:
        """Note entries as shown (any order): every page the feed holds, and every live batch."""
        for entry in entries:
            self.frontier.observe(entry.created_at, entry.atom_id)
            position = (entry.created_at, entry.atom_id)
            if self.floor is None or position < self.floor:
                self.floor = position

    def query(self, base: RecentQuery) -> RecentQuery:
        """`base` read from what is new to this tracker: from the newest instant shown, `overlap` below it,
        never below the floor (a poll's read, and where a push follow of what is shown starts)."""
        start = start_of(self.frontier.mark(), self.overlap)
        floor = self.floor
        since = start.since if floor is None or start.since is None else max(start.since, floor[0])
        low = base.since if since is None else since if base.since is None else max(base.since, since)
        return base.replace(since=low, cursor=None)

    def take(self, entries: list[Entry]) -> list[Entry]:
        """Pushed entries (a follow's, newest first) that are new, noted as shown.

        The push delivers each entry once; this is the safety net the polls have too: ids shown at
        (or within the overlap below) the newest instant are dropped, and so is anything at or below
        the oldest entry shown (the floor: reading on by cursor reaches it).
        """
        shown = set(self.frontier.ids)
        floor = self.floor
        fresh = [e for e in entries if e.atom_id not in shown and (floor is None or (e.created_at, e.atom_id) > floor)]
        self.observe(fresh)
        return fresh

    def changed(self, probe: Probe) -> bool:
        """Whether a poll is worth making: always when the backend has no cheap probe (an endpoint)."""
        token = probe()
        if token is None:
            return True
        if token == self.token:
            return False
        self.token = token
        return True

    def poll(
        self,
        backend: Backend,
        scope: str | None = None,
        include_history: bool = False,
        *,
        base: RecentQuery | None = None,
        max_pages: int | None = LIVE_PAGES,
    ) -> LiveBatch:
        """Read what is newer than the newest shown (the walk from the shown frontier, ids shown dropped).

        Before anything was shown, the first page of the scope is what is new. `base` carries the
        scope and filters instead (`recent --follow`: its `--since` and `--exclude-author`);
        `max_pages=None` reads every new page (nothing may overflow).
        """
        if base is None:
            base = RecentQuery(scope=scope, include_history=include_history)
        query = self.query(base).replace(limit=MAX_LIMIT)
        floor = self.floor
        # Nothing shown yet: one page is the feed's new top; the rest is reached by scrolling.
        # (`max_pages=None`: every new page, whether or not anything was shown.)
        pages = max_pages if self.frontier.newest is not None or max_pages is None else 1
        held = start_of(self.frontier.mark(), self.overlap).held
        walk = Walk(backend, query, held=held, overlap=self.overlap, max_pages=pages)
        fresh = [
            entry
            for page in walk.pages()
            for entry in page
            if floor is None or (entry.created_at, entry.atom_id) > floor
        ]
        return LiveBatch(fresh, overflow=not walk.progress.done)
