"""Provides the embedded store's reads of many entries: the keyset feed page, its one-statement stream, and search."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from operator import itemgetter
from typing import TYPE_CHECKING

from mnemo_tui.engine import cursor as cursors
from mnemo_tui.engine import fts
from mnemo_tui.engine.base import Database
from mnemo_tui.engine.rules import check_read, check_search, query_words, spliced_entry, with_superseded_by
from mnemo_tui.limits import check_limit, room_of
from mnemo_tui.values.model import Entry, Page, RecentQuery, Value, WirePage

if TYPE_CHECKING:
    from typing import Any

    from mnemo_tui.values.search import SearchHit, SearchQuery

_FEED_COLUMNS = "a.created_at, a.atom_id, a.wire, a.superseded_by"
_FIRST = itemgetter(0)
_WIRE = itemgetter(2)
# What `with_superseded_by` adds to a wire text besides the id: `,"superseded_by":"` and `"`.
SPLICE_BYTES = 19
FEED_ORDER = "created_at DESC, atom_id DESC"  # the feed's order by its columns' names (`bounded_rows`)
# A page of a walk part as an engine reads it (`FeedOps.joined_pages`): its items' UTF-8 text joined by commas,
# its rows, and its last row's created_at and atom_id (the next page's position).
Joined = tuple[bytes, int, int, str]


def item_bytes(wire: str, superseded_by: str | None = None) -> int:
    """The bytes an entry adds to a page or an event's items: its UTF-8 text as sent and a comma."""
    size = len(wire) if wire.isascii() else len(wire.encode())
    return size + 1 + (0 if superseded_by is None else SPLICE_BYTES + len(superseded_by))


def joined(rows: list[Any], limit: int, spliced: bool) -> list[Joined]:
    """Rows (created_at, atom_id, wire, and superseded_by when `spliced`) as pages of `limit`, each joined."""
    read = []
    for start in range(0, len(rows), limit):
        chunk = rows[start : start + limit]
        if spliced:
            texts = [w if s is None else with_superseded_by(w, s) for _c, _a, w, s in chunk]
        else:
            texts = list(map(_WIRE, chunk))
        read.append((",".join(texts).encode(), len(chunk), chunk[-1][0], chunk[-1][1]))
    return read


class JoinedPage(Value):
    """A feed page of a streamed walk: its items' wire texts as sent, UTF-8, joined by commas (what goes between
    the JSON answer's `[` and `]`), how many, and the next cursor (None at the walk's end).

    One text a page, not one a row: the walk's server sends it as it is (`routes.page_pieces`), and SQLite joins
    it in its statement (`SqliteDatabase.joined_pages`), so no Python object is made per entry (issue 64)."""

    items: bytes
    count: int
    next_cursor: str | None


class Matching(Value):
    """An engine's full-text match inside the one search statement.

    Attributes:
        score: an expression, higher for a stronger match.
        source: the FROM clause, naming the atoms `a`.
        condition: the WHERE condition that keeps the matches.
        params: the condition's parameters.
        leading: parameters of `score` and `source`, which come first in the statement.
    """

    score: str
    source: str
    condition: str
    params: list[Any]
    leading: tuple[Any, ...] | list[Any] = ()


class FeedOps(Database):
    """The feed and search: every read of many entries is one statement over one scope."""

    def _positioned(self, plan: FeedPlan, q: RecentQuery) -> tuple[Any, ...]:
        """A plan's parameters with the position of the query's cursor (checked here) after them."""
        if q.cursor is None:
            return plan.params
        return (*plan.params, *cursors.decode(self.secret, plan.bound, q.cursor))

    def _page(self, principal: str, q: RecentQuery) -> tuple[list[Any], str | None, bool]:
        """The one page builder: `limit + 1` rows (so the last page carries no cursor), the membership
        check of an empty room read, and the next cursor from the last row returned.

        Rows are (created_at, atom_id, wire), with superseded_by fourth where the plan says a row can
        have one (`FeedPlan.spliced`).

        What `RecentQuery.validated` checks, checked where it is cheapest (`_checked_plan`)."""
        limit, plan = _checked_plan(principal, q, True)
        params = self._positioned(plan, q)
        rows = self.fetch_all(plan.sql, (*params, limit + 1))
        if not rows and plan.room_id is not None:
            with self.reading():
                self.require_member(principal, plan.room_id)
        if len(rows) <= limit:
            return rows, None, plan.spliced
        del rows[limit:]
        last = rows[-1]
        return rows, cursors.encode(self.secret, plan.bound, last[0], last[1]), plan.spliced

    def recent(self, principal: str, q: RecentQuery) -> Page:
        """One page of the feed, newest first, with the cursor of the next page (None at the end).

        Raises:
            ValidationError: bad limit, scope, times or cursor.
            Forbidden: a room the principal is not a member of, or that does not exist.
        """
        rows, cursor, spliced = self._page(principal, q)
        if spliced:
            return Page([Entry(c, a, w if s is None else with_superseded_by(w, s)) for c, a, w, s in rows], cursor)
        return Page(list(map(Entry._make, rows)), cursor)

    def recent_wire(self, principal: str, q: RecentQuery) -> WirePage:
        """The same page as `recent`, as the entries' wire texts read row by row, with no `Entry` built: what the
        server's joined pages (`recent_wire_pages`) are held to, byte for byte, in the tests."""
        rows, cursor, spliced = self._page(principal, q)
        if spliced:
            return WirePage([w if s is None else with_superseded_by(w, s) for _c, _a, w, s in rows], cursor)
        return WirePage(list(map(_WIRE, rows)), cursor)

    def recent_wire_pages(self, principal: str, q: RecentQuery, pages: int, max_bytes: int) -> list[JoinedPage]:
        """The next pages of a walk from the query's cursor, each as its items' text joined (`JoinedPage`): up to
        `pages` pages of `limit` entries, while their items total at most `max_bytes` (`joined_pages`), each but
        the walk's last with the cursor of its last entry. A page may be short only where the bound cut it (it is
        the list's last, and carries a cursor); a read that finds nothing is one empty last page.

        The cursor is checked once, the pages read in one database call and only the cursors handed out are
        signed, where a page at a time does all three a page (issue 64).

        Raises:
            ValidationError: bad limit, scope, times or cursor.
            Forbidden: a room the principal is not a member of, or that does not exist.
        """
        limit, plan = _checked_plan(principal, q, True)
        params = self._positioned(plan, q)
        after = plan if q.cursor is not None else _feed_plan(principal, q.filters(), True, True)
        read, more = self.joined_pages(plan, params, after, limit, pages, max_bytes)
        if not read:
            if plan.room_id is not None:
                with self.reading():
                    self.require_member(principal, plan.room_id)
            return [JoinedPage(b"", 0, None)]
        last = len(read) - 1
        return [
            JoinedPage(text, count, cursors.encode(self.secret, plan.bound, at, atom) if more or i < last else None)
            for i, (text, count, at, atom) in enumerate(read)
        ]

    def joined_pages(
        self, plan: FeedPlan, params: tuple[Any, ...], after: FeedPlan, limit: int, pages: int, max_bytes: int
    ) -> tuple[list[Joined], bool]:
        """Up to `pages` pages of `limit` rows of a feed plan run with `params`, while their items total at most
        `max_bytes` (`item_bytes`; the first row is kept whatever its size), each as (its items' text joined, its
        rows, its last row's created_at and atom_id), and whether more rows follow. `after` is the plan of a read
        from a position (its parameters are `after.params` and the position), which an engine may use for the
        pages after the first.

        Here from the rows of one bounded statement (`bounded_rows`); SQLite joins the texts in its own statement.
        """
        rows, more = self.bounded_rows(plan.sql, params, limit * pages, max_bytes, 2, plan.spliced, FEED_ORDER)
        return joined(rows, limit, plan.spliced), more

    def stream_wire(self, principal: str, q: RecentQuery, chunk: int | None = None) -> Iterator[list[str]]:
        """Every remaining entry of a walk as wire JSON strings, in chunks (of `chunk` rows, or the
        engine's `stream_rows`), from one statement.

        One statement reads one snapshot, so the stream holds exactly the entries that existed
        when it began: the same promise as a cursor walk, at a fraction of the cost.
        """
        plan = _checked_plan(principal, q, False)[1]
        params = self._positioned(plan, q)
        if plan.room_id is not None:
            with self.reading():
                self.require_member(principal, plan.room_id)
        for rows in self.stream(plan.sql, params, chunk or self.stream_rows):
            if plan.spliced:
                yield [wire if later is None else with_superseded_by(wire, later) for wire, later in rows]
            else:
                yield list(map(_FIRST, rows))

    def change_token(self) -> tuple[int, int]:
        """A cheap token that changes whenever the store's contents may have changed.

        `PRAGMA data_version` moves when another connection commits; `total_changes` when this
        one writes. Watchers (the TUI) compare tokens instead of re-reading the feed.
        """
        with self.reading() as db:
            version = int(db.execute("PRAGMA data_version").fetchone()[0])
            return version, db.total_changes

    def domains(self, principal: str) -> list[str]:
        """The principal's own domains, sorted."""
        with self.reading() as db:
            bucket = self.own_bucket(principal)
            if bucket is None:
                return []
            rows = db.execute(
                "SELECT DISTINCT domain FROM atoms WHERE bucket = ? ORDER BY domain", (bucket,)
            ).fetchall()
        return [r[0] for r in rows]

    def search(self, principal: str, q: SearchQuery) -> list[SearchHit]:
        """Full-text search (FTS5, bm25) over one scope, inside the index of the scope's bucket only.

        Raises:
            ValidationError: an empty query or out-of-range fields.
            Forbidden: a room one is not a member of.
        """
        from mnemo_tui.values.search import SearchHit

        check_read(("query", q.query), ("scope", q.scope), ("author", q.author), ("exclude_author", q.exclude_author))
        words = query_words(q.query)
        check_search(q.top_k, q.since, q.until)
        room_id = room_of(q.scope)
        with self.reading() as db:
            bucket = self.room_bucket(principal, room_id) if room_id is not None else self.own_bucket(principal)
            matching = self.matching(bucket, words) if bucket is not None else None
            if matching is None:
                return []
            sql, params = scoped(principal, q.scope, f"{_FEED_COLUMNS}, {matching.score} AS score", matching.source)
            more, extra = filtered(q)
            order = (
                "score DESC, a.created_at DESC" if q.order_by == "relevance" else "a.created_at DESC, a.atom_id DESC"
            )
            sql += f" AND {matching.condition}{more} ORDER BY {order} LIMIT ?"
            rows = db.execute(sql, [*matching.leading, *params, *matching.params, *extra, q.top_k]).fetchall()
        # relevance is a hit's strength relative to the best hit's (a score is higher for a stronger match).
        strongest = max((float(r[4]) for r in rows), default=0.0) or 1.0
        return [
            SearchHit(
                entry=spliced_entry(r),
                relevance=round(max(0.0, float(r[4])) / strongest, 6),
            )
            for r in rows
        ]

    def matching(self, bucket: int, words: list[str]) -> Matching | None:
        """How a search finds the query's words in one bucket (FTS5 here; bm25 is negated so higher is stronger)."""
        expression = fts.match(bucket, words, self.language)
        if not expression:
            return None
        return Matching(
            score="-bm25(atoms_fts)",
            source="atoms_fts JOIN atoms a ON a.seq = atoms_fts.rowid",
            condition="atoms_fts MATCH ?",
            params=[expression],
        )


def scoped(principal: str, scope: str | None, select: str, source: str) -> tuple[str, list[Any]]:
    """`SELECT ... FROM source ... WHERE <the scope>`: one own domain, all of them, or a room.

    A room is read through `members`: the statement returns no rows to a non-member.
    """
    room_id = room_of(scope)
    if room_id is not None:
        sql = (
            f"SELECT {select} FROM {source} JOIN rooms r ON r.bucket = a.bucket "
            "JOIN members m ON m.room_id = r.room_id WHERE r.room_id = ? AND m.principal = ?"
        )
        return sql, [room_id, principal]
    # The bucket is looked up inside the statement (one statement a page, none before it);
    # a principal without one reads no rows.
    sql = (
        f"SELECT {select} FROM {source} WHERE a.bucket = (SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?)"
    )
    params: list[Any] = [principal]
    if scope is not None:
        sql += " AND a.domain = ?"
        params.append(scope)
    return sql, params


class FeedPlan(Value):
    """What every page of one walk shares, built once per walk (`_feed_plan`), not once per page.

    Attributes:
        sql: the statement; a page's ends in `LIMIT ?`. The same text page after page, whose hash
            `sqlite3`'s statement cache then finds already computed.
        params: its parameters but the position's (the cursor's two values come next) and the limit's.
        bound: the cursor binding of the reader and these filters (`cursor.binding`).
        room_id: the room of a room scope (None otherwise), whose membership an empty read checks.
        spliced: whether a row can name a later version (history is read, or a room, where the filter
            is inert): `superseded_by` is then selected last and spliced into the wire text. Otherwise
            the statement keeps only rows without one, and does not read the column.
    """

    sql: str
    params: tuple[Any, ...]
    bound: bytes
    room_id: str | None
    spliced: bool


def _checked_plan(principal: str, q: RecentQuery, page: bool) -> tuple[int, FeedPlan]:
    """A query's limit and the plan of its read, every field checked as `RecentQuery.validated` checks it,
    in the order the engines answer: the limit, then the scope and the times by the plan, once a walk
    (`_feed_plan` is cached), then the cursor by decoding it (`_positioned`), which refuses all that the
    shape check would, with the same message.

    Raises:
        ValidationError: the first bad field.
    """
    limit = check_limit(q.limit)
    filters = q.filters()
    try:
        return limit, _feed_plan(principal, filters, q.cursor is not None, page)
    except TypeError:  # an unhashable filter (a list, a dict): the engine is called with the wrong types
        q.validated()  # names it
        raise


@lru_cache(maxsize=256, typed=True)
def _feed_plan(principal: str, filters: tuple[Any, ...], positioned: bool, page: bool) -> FeedPlan:
    """The plan of a feed read for a reader and `RecentQuery.filters()`, with a position or without,
    as a page (`LIMIT ?`) or a stream.

    Raises:
        ValidationError: a bad scope, or `until` before `since`.
    """
    scope, since, until, exclude, history, author = filters
    q = RecentQuery(
        scope=scope, since=since, until=until, exclude_author=exclude, include_history=history, author=author
    ).validated()  # raises for a bad scope or times: nothing is cached then
    check_read(("scope", scope), ("author", author), ("exclude_author", exclude))
    room_id = room_of(scope)
    spliced = not _current_only(q)
    # A stream prints wire texts and reads no position: it selects only them.
    columns = "a.created_at, a.atom_id, a.wire" if page else "a.wire"
    sql, params = scoped(principal, scope, columns + (", a.superseded_by" if spliced else ""), "atoms a")
    more, extra = filtered(q)
    sql += more
    if positioned:
        sql += " AND (a.created_at, a.atom_id) < (?, ?)"
    sql += " ORDER BY a.created_at DESC, a.atom_id DESC"
    sql = sql + " LIMIT ?" if page else sql
    return FeedPlan(sql, (*params, *extra), cursors.binding(principal, q), room_id, spliced)


# Portable SQL (COALESCE, not IFNULL): both engines run it.
_PRINCIPAL_AGENT = "COALESCE(a.principal || '/' || COALESCE(NULLIF(a.agent_name, ''), a.agent), '')"


def filtered(q: RecentQuery | SearchQuery) -> tuple[str, list[Any]]:
    """The time, author and supersession conditions shared by the feed and search."""
    sql = ""
    params: list[Any] = []
    if q.since is not None:
        sql += " AND a.created_at >= ?"
        params.append(q.since)
    if q.until is not None:
        sql += " AND a.created_at <= ?"
        params.append(q.until)
    # An author is a principal, or the AUTHOR column's `principal/agent` (model.by_author says the same).
    if q.author is not None:
        sql += f" AND (a.principal = ? OR {_PRINCIPAL_AGENT} = ?)"
        params += [q.author, q.author]
    if q.exclude_author is not None:
        sql += f" AND a.principal != ? AND {_PRINCIPAL_AGENT} != ?"
        params += [q.exclude_author, q.exclude_author]
    if _current_only(q):
        sql += " AND a.superseded_by IS NULL"
    return sql, params


def _current_only(q: RecentQuery | SearchQuery) -> bool:
    """Whether a read keeps only entries no later version replaced (then none of its rows names one).
    Room entries cannot be superseded, so the read-side filter is inert there."""
    return not q.include_history and room_of(q.scope) is None
