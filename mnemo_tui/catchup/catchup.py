"""Provides the catch-up pass: the walk from a consumer's watermark to the end of the feed, then its commit."""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from mnemo_tui.backends import Backend
from mnemo_tui.catchup.walk import Mark, Walk, default_overlap, start_of
from mnemo_tui.errors import ConsumerMoved, Forbidden, RemovalsGone, ValidationError
from mnemo_tui.state.statedb import Base, Checkpoint, StateDB, StateKey
from mnemo_tui.values.model import Entry, RecentQuery, Value, WalkProgress, Watermark
from mnemo_tui.values.removals import NO_TOMBSTONES, REREAD, Removal
from mnemo_tui.values.removals import Removals as ReadRemovals

if TYPE_CHECKING:
    from mnemo_tui.backends.remote_consumers import ServerWatermarks

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
    removed: tuple[Removal, ...] = ()


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
        changes: also report the removals since the watermark (`catchup --changes`, removals.py).
        start: where a consumer with no watermark begins (`--start newest|TIME`), asked only then (given the
            overlap): its watermark
            is set there before its first pass (docs/consumers.md); None (or its None) begins at the oldest entry.
    """

    def __init__(
        self,
        backend: Backend,
        state: StateDB | ServerWatermarks,
        *,
        consumer: str = "default",
        scope: str | None = None,
        limit: int = DEFAULT_LIMIT,
        overlap: int | None = None,
        since: int | None = None,
        changes: bool = False,
        start: Callable[[int], tuple[int, tuple[str, ...]] | None] | None = None,
    ) -> None:
        self.backend = backend
        self.state = state
        self.consumer = consumer
        self.scope = scope
        self.limit = limit
        self.overlap = default_overlap(backend) if overlap is None else overlap
        self.since = since
        self.changes = changes
        self.start = start
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
        removed: Callable[[list[Removal]], None] | None = None,
    ) -> CatchupResult:
        """Walk to the end of the feed, emitting what is new; commit only once the walk has ended.

        `emit` must have flushed a page's output when it returns: the checkpoint saved after it
        is what `resume` continues from. With `deliver`, `emit` only holds what it is given (to
        print it oldest first): no checkpoint is saved, since nothing has left, and `deliver`
        writes it all once the walk has ended, before the commit. An empty pass keeps the old watermark. One pass of a
        consumer's scope runs at a time (`StateDB.claim_run`); `notice` hears what the pass found
        of an interrupted one (only once it is the one running, so no live pass reads as interrupted).
        With `changes`, `removed` is given the removals to report after the entries, before the commit.

        Raises:
            Conflict: another pass of this consumer's scope is running.
        """
        walk_id = secrets.token_hex(8)
        if commit:
            self.state.claim_run(self.key, walk_id)
        try:
            return self._run(walk_id, emit, commit, resume, notice or (lambda text: None), deliver, removed)
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
        on_removed: Callable[[list[Removal]], None] | None = None,
    ) -> CatchupResult:
        before = self.watermark()
        begin = self.start(self.overlap) if before is None and self.start is not None else None
        if begin is not None:
            before = self._begin(begin, commit)
        found = self.state.load_checkpoint(self.key) if commit or resume else None
        if resume and found is None:
            notice("nothing to resume: starting a new pass from the watermark")
        elif not resume and commit and found is not None:
            notice("an interrupted walk was found; re-reading from the watermark (use --resume to continue it)")
        # Read before the walk: every entry older than the newest removal seen here was committed before it
        # (a bucket's clock orders its commits), so the walk delivers it (docs/architecture.md).
        removals = Removals(self.backend, self.scope, before) if self.changes else None
        walk: Walk | None = None
        cp = found if resume else None
        # What the commit compares on a server's consumer: the position the (interrupted) walk started from.
        base: Base = cp.base if cp is not None else _base(before)
        if cp is not None:
            walk_id = cp.walk_id
            walk = self._walk(cp.since, frozenset(cp.skip), cp.progress)
        else:
            start = start_of(Mark.of(before), self.overlap, self.since)
            walk = self._walk(start.since, start.held, None)
        try:
            for fresh in walk.pages():
                if fresh:
                    emit(fresh)
                if commit and deliver is None:
                    held = tuple(sorted(walk.held))
                    checkpoint = Checkpoint(walk_id, walk.query.since, held, walk.progress, base=base)
                    self.state.save_checkpoint(self.key, checkpoint)
        except Forbidden:
            # Its removals were readable, its feed is not: a room deleted since, whose former member hears of it.
            if removals is None:
                raise
        removed = removals.since(walk.progress.newest) if removals is not None else []
        if deliver is not None:
            deliver()
        if removed and on_removed is not None:
            on_removed(removed)
        return self._finish(walk, before, commit, base, resumed=cp is not None, removals=removals, removed=removed)

    def _begin(self, start: tuple[int, tuple[str, ...]], commit: bool) -> Watermark:
        """A consumer's first watermark, from its start policy: stored (unless `--no-commit`) before the walk, so a
        first pass that finds nothing still leaves the consumer there; a parallel first pass that set it first wins."""
        if not commit:
            return Watermark(self.scope, self.consumer, start[0], start[1], updated_at=start[0])
        try:
            return self.state.commit(self.key, start[0], start[1], expected=None)
        except ConsumerMoved:
            found = self.watermark()
            assert found is not None  # it moved: it is somewhere
            return found

    def _finish(
        self,
        walk: Walk,
        before: Watermark | None,
        commit: bool,
        base: Base,
        resumed: bool,
        removals: Removals | None = None,
        removed: list[Removal] | None = None,
    ) -> CatchupResult:
        progress = walk.progress
        after = before
        committed = False
        top = removals.top if removals is not None else None
        newest = max((t for t in (progress.newest, top) if t is not None), default=None)
        if commit:
            if newest is not None and (progress.delivered > 0 or newest != progress.newest):
                # Past the newest removal too: the next pass neither repeats it nor misses an entry (see `_run`).
                ids = progress.newest_ids if progress.delivered > 0 else (before.boundary_ids if before else ())
                after = self.state.commit(self.key, newest, ids, expected=base)
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
            removed=tuple(removed or ()),
        )


def _base(mark: Watermark | None) -> Base:
    return None if mark is None else (mark.created_at, mark.boundary_ids)


class Removals:
    """The removals side of one `--changes` pass: the first read (before the walk) and the reported window.

    Raises (on creation and in `since`):
        ValidationError: the backend keeps no tombstones (exit 2).
        RemovalsGone: the watermark is older than the removals kept (exit 8).
    """

    def __init__(self, backend: Backend, scope: str | None, before: Watermark | None) -> None:
        self.backend = backend
        self.scope = scope
        self.after = before.created_at if before is not None else None
        self.consumer = before.consumer if before is not None else ""
        first = self._read(None)
        self.top = first.newest

    def _read(self, upto: int | None) -> ReadRemovals:
        found = self.backend.removals(self.scope, self.after, upto)
        if found is None:
            raise ValidationError(NO_TOMBSTONES)
        if found.gone:
            flags = f" --scope {shlex.quote(self.scope)}" if self.scope else ""
            shown = self.scope if self.scope else "your own store"
            raise RemovalsGone(
                REREAD.format(consumer=self.consumer, scope=shown, flags=flags),
                details={"reason": "removals_gone", "scope": self.scope},
            )
        return found

    def since(self, newest_entry: int | None) -> list[Removal]:
        """The removals to report: after the watermark, up to the newer of the walk's newest entry and the
        newest removal of the first read. A first pass (no watermark) reports every removal kept: a
        consumer may hold copies from elsewhere (an export), and each removal is then reported once."""
        upto = max((t for t in (newest_entry, self.top) if t is not None), default=None)
        if upto is None:
            return []
        return self._read(upto).items
