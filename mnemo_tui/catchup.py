"""Provides the catch-up pass: the walk from a consumer's watermark to the end of the feed, then its commit."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from mnemo_tui.backends import Backend
from mnemo_tui.model import Entry, RecentQuery, Value, WalkProgress, Watermark
from mnemo_tui.state.statedb import Checkpoint, StateDB, StateKey
from mnemo_tui.walk import Mark, Walk, default_overlap, start_of

Emit = Callable[[list[Entry]], None]
DEFAULT_LIMIT = 100


class CatchupResult(Value):
    """What one pass did."""

    delivered: int
    pages: int
    repeats_skipped: int
    resumed: bool
    before: Watermark | None
    after: Watermark | None
    committed: bool
    since: int | None


class CatchUp:
    """One consumer's catch-up on one scope of one backend.

    Args:
        backend: where the entries come from.
        state: where watermarks and checkpoints live.
        consumer: the reader's name; each consumer keeps its own watermark per scope.
        scope: None (own store), a domain, or an `xroom:` address.
        limit: page size of each request (a ceiling).
        overlap: microseconds re-read below the watermark (default: the walk's, by backend kind).
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
        overlap: int | None = None,
        since: int | None = None,
    ) -> None:
        self.backend = backend
        self.state = state
        self.consumer = consumer
        self.scope = scope
        self.limit = limit
        self.overlap = default_overlap(backend) if overlap is None else overlap
        self.since = since
        self.key = StateKey(backend.identity, backend.principal, consumer, scope)

    def watermark(self) -> Watermark | None:
        """This consumer's current watermark for this scope."""
        return self.state.load(self.key)

    def has_checkpoint(self) -> bool:
        return self.state.load_checkpoint(self.key) is not None

    def _walk(self, since: int | None, held: frozenset[str], progress: WalkProgress | None) -> Walk:
        query = RecentQuery(scope=self.scope, since=since, limit=self.limit)
        return Walk(self.backend, query, held=held, overlap=self.overlap, progress=progress)

    def run(
        self,
        emit: Emit,
        *,
        commit: bool = True,
        resume: bool = False,
        notice: Callable[[str], None] | None = None,
        deliver: Callable[[], None] | None = None,
    ) -> CatchupResult:
        """Walk to the end of the feed, emitting what is new; commit only once the walk has ended.

        `emit` must have flushed a page's output when it returns: the checkpoint saved after it
        is what `resume` continues from. With `deliver`, `emit` only holds what it is given (to
        print it oldest first): no checkpoint is saved, since nothing has left, and `deliver`
        writes it all once the walk has ended, before the commit. An empty pass keeps the old watermark. One pass of a
        consumer's scope runs at a time (`StateDB.claim_run`); `notice` hears what the pass found
        of an interrupted one (only once it is the one running, so no live pass reads as interrupted).

        Raises:
            Conflict: another pass of this consumer's scope is running.
        """
        walk_id = secrets.token_hex(8)
        if commit:
            self.state.claim_run(self.key, walk_id)
        try:
            return self._run(walk_id, emit, commit, resume, notice or (lambda text: None), deliver)
        finally:
            if commit:
                self.state.release_run(self.key, walk_id)

    def _run(
        self,
        walk_id: str,
        emit: Emit,
        commit: bool,
        resume: bool,
        notice: Callable[[str], None],
        deliver: Callable[[], None] | None,
    ) -> CatchupResult:
        before = self.watermark()
        found = self.state.load_checkpoint(self.key) if commit or resume else None
        if resume and found is None:
            notice("nothing to resume: starting a new pass from the watermark")
        elif not resume and commit and found is not None:
            notice("an interrupted walk was found; re-reading from the watermark (use --resume to continue it)")
        walk: Walk | None = None
        cp = found if resume else None
        if cp is not None:
            walk_id = cp.walk_id
            walk = self._walk(cp.since, frozenset(cp.skip), cp.progress)
        else:
            start = start_of(Mark.of(before), self.overlap, self.since)
            walk = self._walk(start.since, start.held, None)
        for fresh in walk.pages():
            if fresh:
                emit(fresh)
            if commit and deliver is None:
                checkpoint = Checkpoint(walk_id, walk.query.since, tuple(sorted(walk.held)), walk.progress)
                self.state.save_checkpoint(self.key, checkpoint)
        if deliver is not None:
            deliver()
        return self._finish(walk, before, commit, resumed=cp is not None)

    def _finish(self, walk: Walk, before: Watermark | None, commit: bool, resumed: bool) -> CatchupResult:
        progress = walk.progress
        after = before
        committed = False
        if commit:
            if progress.delivered > 0 and progress.newest is not None:
                after = self.state.commit(self.key, progress.newest, progress.newest_ids)
                committed = True
            else:
                # An empty pass keeps the old watermark; only the finished walk's checkpoint goes.
                self.state.drop_checkpoint(self.key)
        return CatchupResult(
            delivered=progress.delivered,
            pages=progress.pages,
            repeats_skipped=progress.repeats,
            resumed=resumed,
            before=before,
            after=after,
            committed=committed,
            since=walk.query.since,
        )
