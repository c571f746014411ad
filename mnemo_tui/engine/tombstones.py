"""Provides tombstones: what every delete path leaves behind (the removed id, its scope, the time, why), their
retention, and the read of the removals since a consumer's watermark (docs/architecture.md, "Tombstones")."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine.base import Database
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.limits import room_of
from mnemo_tui.values.removals import Position, Removal, Removals

if TYPE_CHECKING:
    from typing import Any

# How long a tombstone is kept (docs/architecture.md): a consumer that has not caught up within it is told
# to re-read its scope. 30 days: a monthly job still hears of every removal.
DEFAULT_RETENTION_US = 30 * 86_400 * 1_000_000
RETENTION_ENV = "MNEMO_TOMBSTONE_RETENTION"
REASONS = ("deleted", "domain_wiped", "room_deleted", "reset")

_INSERT_ONE = "INSERT INTO tombstones(bucket, atom_id, domain, removed_at, reason) VALUES (?, ?, ?, ?, ?)"


def retention_from(value: str | None, *, field: str = RETENTION_ENV) -> int | None:
    """A retention span (`30d`, `12h`, `0s`) in microseconds; None when not given.

    Raises:
        ValidationError: not a span of the time grammar.
    """
    if value is None or not value.strip():
        return None
    try:
        return timefmt.parse_overlap(value.strip())
    except ValidationError:
        raise ValidationError(f"{field} must be a span such as 30d, 12h or 0s, got {value!r}") from None


class TombstoneOps(Database):
    """Tombstones of one store: written by the delete paths inside their transactions, read by `removals`."""

    # Set by `mnemo serve --tombstone-retention`; None: `MNEMO_TOMBSTONE_RETENTION`, else the default.
    tombstone_retention: int | None = None

    def retention_us(self) -> int:
        if self.tombstone_retention is not None:
            return self.tombstone_retention
        found = retention_from(os.environ.get(RETENTION_ENV))
        return DEFAULT_RETENTION_US if found is None else found

    def removal_time(self, db: Any, bucket: int) -> tuple[Any, int]:
        """The bucket's clock (held to commit: SQLite's write lock, PostgreSQL's row lock) and the instant of a
        removal from it, `max(now, last + 1)` as an entry gets: so removals and entries of one bucket are
        committed in the order of their times, and "since the watermark" neither misses nor repeats one."""
        clock = self.clock(db)
        return clock, clock.next(bucket, timefmt.now_us())

    def bury_one(self, db: Any, bucket: int, atom: str, domain: str, at: int) -> None:
        db.execute(_INSERT_ONE, (bucket, atom, domain, at, "deleted"))
        self._drop_expired(db, bucket)

    def bury_set(self, db: Any, bucket: int, where: str, params: tuple[Any, ...], reason: str) -> None:
        """Tombstones for every atom of a set about to be deleted, in one statement at one instant of the clock."""
        clock, at = self.removal_time(db, bucket)
        db.execute(
            f"INSERT INTO tombstones(bucket, atom_id, domain, removed_at, reason) "
            f"SELECT bucket, atom_id, domain, ?, ? FROM atoms WHERE {where}",
            (at, reason, *params),
        )
        clock.save()
        self._drop_expired(db, bucket)

    def _drop_expired(self, db: Any, bucket: int) -> None:
        """Drop the bucket's tombstones past the retention, remembering the newest dropped (a watermark
        older than it has missed removals: `removals` answers gone)."""
        cutoff = timefmt.now_us() - self.retention_us()
        db.execute(
            "UPDATE buckets SET tombstones_dropped = (SELECT max(removed_at) FROM tombstones "
            "WHERE bucket = ? AND removed_at < ?) WHERE bucket = ? AND EXISTS "
            "(SELECT 1 FROM tombstones WHERE bucket = ? AND removed_at < ?)",
            (bucket, cutoff, bucket, bucket, cutoff),
        )
        db.execute("DELETE FROM tombstones WHERE bucket = ? AND removed_at < ?", (bucket, cutoff))

    def remember_members(self, db: Any, room_id: str, bucket: int) -> None:
        """A deleted room's members may still read its tombstones (their copies hold its entries)."""
        db.execute(
            "INSERT INTO departed(bucket, principal) SELECT ?, principal FROM members WHERE room_id = ? "
            "ON CONFLICT DO NOTHING",
            (bucket, room_id),
        )

    def removals(
        self,
        principal: str,
        scope: str | None,
        after: int | None,
        upto: int | None = None,
        *,
        limit: int | None = None,
        start: Position | None = None,
    ) -> Removals:
        """The removals of one scope with `after < removed_at <= upto`, oldest first, from one snapshot.

        `gone` is set when tombstones newer than `after` were dropped (or are past the retention):
        the reader must re-read its scope. A room's former members still read a deleted room's removals.
        Paged: at most `limit` of them, those past `start` (a page's `next`: the last removal it held, in
        the order of `(removed_at, atom_id)`, since one delete of a set leaves all of it at one instant).

        Raises:
            Forbidden: a room one is not (and was not) a member of.
        """
        room_id = room_of(scope) if scope is not None else None
        cutoff = timefmt.now_us() - self.retention_us()
        if room_id is None:
            source = "b.kind = 'own' AND b.owner = ?"
            params: list[Any] = [principal]
        else:
            source = (
                "b.kind = 'room' AND b.owner = ? AND (EXISTS (SELECT 1 FROM members m WHERE m.room_id = b.owner "
                "AND m.principal = ?) OR EXISTS (SELECT 1 FROM departed d WHERE d.bucket = b.bucket AND d.principal = ?))"
            )
            params = [room_id, principal, principal]
        domain = "" if scope is None or room_id is not None else " AND t.domain = ?"
        low = -1 if after is None else after
        high = timefmt.MAX_US * 10 if upto is None else upto
        past, past_params = _past(low, start)
        page = "" if limit is None else f" LIMIT {int(limit) + 1}"
        with self.reading() as db:
            rows = db.execute(
                "SELECT b.tombstones_dropped, t.atom_id, t.domain, t.removed_at, t.reason FROM buckets b "
                f"LEFT JOIN tombstones t ON t.bucket = b.bucket AND {past} AND t.removed_at <= ?"
                f"{domain} WHERE {source} ORDER BY t.removed_at, t.atom_id{page}",
                (*past_params, high, *([scope] if domain else []), *params),
            ).fetchall()
        if room_id is not None and not rows:
            raise Forbidden("you are not a member of this room (or it does not exist)")
        dropped = max((int(r[0]) for r in rows), default=0)
        items = [Removal(r[1], r[2], int(r[3]), r[4]) for r in rows if r[1] is not None]
        more = limit is not None and len(items) > limit
        if more:
            items = items[: int(limit or 0)]
        # `dropped` 0 is "none dropped" (every removal is stamped after 1970): an `after` before 1970 missed nothing.
        # Past a page's position, a tombstone dropped at its instant may be one of that instant not yet read.
        lost = (after is not None and dropped > max(after, 0)) if start is None else dropped >= start[0]
        gone = after is not None and (lost or any(i.removed_at < cutoff for i in items))
        position = (items[-1].removed_at, items[-1].atom_id) if more else None
        return Removals([i for i in items if i.removed_at >= cutoff], gone, position)


def _past(low: int, start: Position | None) -> tuple[str, tuple[Any, ...]]:
    """The join's low bound: past `low`, or past a page's position, as one range of the index
    `(bucket, removed_at, atom_id)`: a page inside a wipe of 50,000 at one instant starts where the last
    ended instead of scanning the instant from its start."""
    if start is None:
        return "t.removed_at > ?", (low,)
    return "(t.removed_at, t.atom_id) > (?, ?)", start
