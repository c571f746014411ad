"""Provides the reads of a push follow (`POST /memory/follow`, docs/server.md "Push follow"): a scope's
position (its bucket's clock) and its entries in a window of instants, oldest first, a page at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui.engine.base import NOT_A_MEMBER, Database
from mnemo_tui.engine.feed import filtered, scoped
from mnemo_tui.engine.rules import check_read, with_superseded_by
from mnemo_tui.errors import Forbidden
from mnemo_tui.limits import dumps, parse_scope, room_of
from mnemo_tui.values.model import RecentQuery

if TYPE_CHECKING:
    from typing import Any

# Portable SQL: both engines run it (PgConnection turns `?` into its own placeholders).
_OWN = "SELECT last_created_at, bucket FROM buckets WHERE kind = 'own' AND owner = ?"
_ROOM = (
    "SELECT b.last_created_at, EXISTS (SELECT 1 FROM members m WHERE m.room_id = b.owner AND m.principal = ?), "
    "b.bucket "
    "FROM buckets b WHERE b.kind = 'room' AND b.owner = ? AND (EXISTS (SELECT 1 FROM members m "
    "WHERE m.room_id = b.owner AND m.principal = ?) OR EXISTS (SELECT 1 FROM departed d "
    "WHERE d.bucket = b.bucket AND d.principal = ?))"
)


class FollowOps(Database):
    """What a follower reads on each wake-up: where its scope's clock stands, then what lies behind it."""

    kind: str

    def bucket_clocks(self, buckets: list[int]) -> dict[int, int]:
        """The clocks (`last_created_at`) of these buckets, in one statement: what a server's hub reads once
        a wake-up for all its followers, so a follower whose bucket did not move reads nothing itself."""
        if not buckets:
            return {}
        # One parameter however many buckets: an array on PostgreSQL, a JSON list on SQLite.
        param: Any
        if self.kind == "postgres":
            where, param = "bucket = ANY(?::bigint[])", buckets
        else:
            where, param = "bucket IN (SELECT value FROM json_each(?))", dumps(buckets)
        rows = self.fetch_all(f"SELECT bucket, last_created_at FROM buckets WHERE {where}", (param,))
        return {int(r[0]): int(r[1]) for r in rows}

    def position(self, principal: str, scope: str | None) -> tuple[int, bool, int | None]:
        """The scope's position (its bucket's `last_created_at`: every entry and removal of the scope has an
        instant at or before it), whether the principal may still read the scope's entries, and the bucket
        (None: an own bucket not yet made).

        An own bucket not yet created reads 0. A room's former member (the room was deleted) still reads
        its position, with False: its removals are theirs to read, its entries no more.

        Raises:
            ValidationError: a bad scope.
            Forbidden: a room the principal is not, and was not, a member of.
        """
        check_read(("scope", scope))
        room_id = room_of(parse_scope(scope))
        with self.reading() as db:
            if room_id is None:
                row = db.execute(_OWN, (principal,)).fetchone()
                return (0, True, None) if row is None else (int(row[0]), True, int(row[1]))
            row = db.execute(_ROOM, (principal, room_id, principal, principal)).fetchone()
        if row is None:
            raise Forbidden(NOT_A_MEMBER)
        return int(row[0]), bool(row[1]), int(row[2])

    def entries_after(
        self, principal: str, q: RecentQuery, after: int, upto: int, limit: int, max_bytes: int | None = None
    ) -> tuple[list[tuple[int, str]], bool]:
        """The scope's entries with `after < created_at <= upto` (the query's author and history filters
        applied; its times, cursor and limit not), oldest first, at most `limit` and, given `max_bytes`, while
        their items total at most that (`Database.bounded_rows`): (created_at, wire) each, and whether more
        entries of the window follow.

        Within one bucket instants are unique, so the instant of the last row is an exact position to
        read the next page after.
        """
        check_read(("scope", q.scope), ("exclude_author", q.exclude_author))
        base = RecentQuery(scope=q.scope, exclude_author=q.exclude_author, include_history=q.include_history)
        spliced = base.include_history or room_of(base.scope) is not None
        columns = "a.created_at, a.wire" + (", a.superseded_by" if spliced else "")
        sql, params = scoped(principal, base.scope, columns, "atoms a")
        more, extra = filtered(base)
        sql += more + " AND a.created_at > ? AND a.created_at <= ? ORDER BY a.created_at, a.atom_id LIMIT ?"
        rows: list[Any]
        if max_bytes is None:
            rows = self.fetch_all(sql, (*params, *extra, after, upto, limit + 1))
            following = len(rows) > limit
            del rows[limit:]
        else:
            rows, following = self.bounded_rows(
                sql, (*params, *extra, after, upto), limit, max_bytes, 1, spliced, "created_at"
            )
        if spliced:
            return [(int(r[0]), r[1] if r[2] is None else with_superseded_by(r[1], r[2])) for r in rows], following
        return [(int(r[0]), r[1]) for r in rows], following

    def page_start(self, principal: str, q: RecentQuery, upto: int) -> int:
        """The position after which the scope's newest `q.limit` entries at or before `upto` lie (the query's
        author and history filters applied, as `entries_after`): the instant before the oldest of them, or
        0 when the scope holds fewer. A follow's first page is that window, read oldest first in bounded
        events as any other."""
        base = RecentQuery(scope=q.scope, exclude_author=q.exclude_author, include_history=q.include_history)
        sql, params = scoped(principal, base.scope, "a.created_at", "atoms a")
        more, extra = filtered(base)
        sql += more + " AND a.created_at <= ? ORDER BY a.created_at DESC, a.atom_id DESC LIMIT 1 OFFSET ?"
        rows = self.fetch_all(sql, (*params, *extra, upto, q.limit - 1))
        return int(rows[0][0]) - 1 if rows else 0
