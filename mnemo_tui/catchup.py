"""Provides the catch-up walk: read from the watermark to the end of the feed, then commit the new watermark."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from mnemo_tui.backends import Backend
from mnemo_tui.model import Entry, RecentQuery, Watermark
from mnemo_tui.state.statedb import Checkpoint, StateDB

Emit = Callable[[list[Entry]], None]
DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class CatchupResult:
    """What one pass did."""

    delivered: int
    pages: int
    repeats_skipped: int
    resumed: bool
    before: Watermark | None
    after: Watermark | None
    committed: bool
    since: int | None


@dataclass
class _Progress:
    since: int | None
    cursor: str | None
    newest: int | None
    newest_ids: list[str]
    skip: frozenset[str]
    pages: int = 0
    delivered: int = 0
    repeats_skipped: int = 0


class CatchUp:
    """One consumer's catch-up on one scope of one backend.

    Args:
        backend: where the entries come from.
        state: where watermarks and checkpoints live.
        consumer: the reader's name; each consumer keeps its own watermark per scope.
        scope: None (own store), a domain, or an `xroom:` address.
        limit: page size of each request (a ceiling).
        overlap: microseconds re-read below the watermark (0 on the embedded store).
        since: the low bound of a first pass, when the consumer has no watermark yet.
    """

    def __init__(
        self,
        backend: Backend,
        state: StateDB,
        *,
        consumer: str = "default",
        scope: str | None = None,
        limit: int = DEFAULT_LIMIT,
        overlap: int = 0,
        since: int | None = None,
    ) -> None:
        self.backend = backend
        self.state = state
        self.consumer = consumer
        self.scope = scope
        self.limit = limit
        self.overlap = overlap
        self.since = since
        self._key = (backend.identity, backend.principal, consumer, scope)

    def watermark(self) -> Watermark | None:
        """This consumer's current watermark for this scope."""
        return self.state.load(*self._key)

    def has_checkpoint(self) -> bool:
        return self.state.load_checkpoint(*self._key) is not None

    def _start(self, before: Watermark | None) -> _Progress:
        low = self.since
        skip: frozenset[str] = frozenset()
        if before is not None and before.created_at is not None:
            from_mark = before.created_at - self.overlap
            low = from_mark if low is None else max(low, from_mark)
            skip = frozenset(before.boundary_ids)
        return _Progress(since=low, cursor=None, newest=None, newest_ids=[], skip=skip)

    def run(self, emit: Emit, *, commit: bool = True, resume: bool = False) -> CatchupResult:
        """Walk to the end of the feed, emitting what is new; commit only once the walk has ended.

        `emit` must have flushed a page's output when it returns: the checkpoint saved after it
        is what `resume` continues from. An empty pass keeps the old watermark.
        """
        before = self.watermark()
        walk_id = secrets.token_hex(8)
        progress: _Progress | None = None
        resumed = False
        if resume:
            cp = self.state.load_checkpoint(*self._key)
            if cp is not None:
                resumed = True
                walk_id = cp.walk_id
                progress = _Progress(
                    since=cp.since,
                    cursor=cp.cursor,
                    newest=cp.newest,
                    newest_ids=list(cp.newest_ids),
                    skip=frozenset(cp.skip),
                    pages=cp.pages,
                    delivered=cp.delivered,
                    repeats_skipped=cp.repeats_skipped,
                )
                if cp.done:
                    return self._finish(progress, before, commit, resumed)
        if progress is None:
            progress = self._start(before)
        while True:
            page = self.backend.recent(
                RecentQuery(scope=self.scope, since=progress.since, limit=self.limit, cursor=progress.cursor)
            )
            progress.pages += 1
            fresh: list[Entry] = []
            for entry in page.items:
                if entry.atom_id in progress.skip:
                    progress.repeats_skipped += 1
                else:
                    fresh.append(entry)
                self._track(progress, entry)
            if fresh:
                emit(fresh)
                progress.delivered += len(fresh)
            progress.cursor = page.next_cursor
            if commit:
                self.state.save_checkpoint(*self._key, self._checkpoint(walk_id, progress))
            if page.next_cursor is None:
                break
        return self._finish(progress, before, commit, resumed)

    def _track(self, progress: _Progress, entry: Entry) -> None:
        # Newest first: the first entry fixes the newest instant; the ids within the overlap
        # window below it (at least those at the instant itself) become the boundary ids.
        if progress.newest is None:
            progress.newest = entry.created_at
        if entry.created_at >= progress.newest - self.overlap:
            progress.newest_ids.append(entry.atom_id)

    def _checkpoint(self, walk_id: str, p: _Progress) -> Checkpoint:
        return Checkpoint(
            walk_id=walk_id,
            since=p.since,
            cursor=p.cursor,
            done=p.cursor is None,
            newest=p.newest,
            newest_ids=tuple(p.newest_ids),
            skip=tuple(sorted(p.skip)),
            pages=p.pages,
            delivered=p.delivered,
            repeats_skipped=p.repeats_skipped,
        )

    def _finish(self, p: _Progress, before: Watermark | None, commit: bool, resumed: bool) -> CatchupResult:
        after = before
        committed = False
        if commit:
            if p.delivered > 0 and p.newest is not None:
                after = self.state.commit(*self._key, p.newest, tuple(dict.fromkeys(p.newest_ids)))
                committed = True
            else:
                # An empty pass keeps the old watermark; only the finished walk's checkpoint goes.
                self.state.drop_checkpoint(*self._key)
        return CatchupResult(
            delivered=p.delivered,
            pages=p.pages,
            repeats_skipped=p.repeats_skipped,
            resumed=resumed,
            before=before,
            after=after,
            committed=committed,
            since=p.since,
        )
