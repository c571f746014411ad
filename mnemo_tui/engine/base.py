"""Provides `Database`: what every operation of both engines is written against (engine/sqlite/, engine/postgres/).

The operations (feed.py, atoms.py, rooms.py, …) run the shared statements of a `Database` on
`db` or in `reading()`/`transaction()`, spelled by its `dialect`; each engine implements the
connection, its transactions, its time limits and its search index, and nothing else.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.errors import Forbidden, Timeout, ValidationError
from mnemo_tui.limits import room_of

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator
    from contextlib import AbstractContextManager
    from typing import Any

    from mnemo_tui.engine.dialect import Dialect

# No entry is stamped after 9000-01-01: a writer whose clock runs wild can push its bucket's clock
# ahead, never to the end of representable time, so `last + 1` always exists and the bucket stays
# writable for everyone (a millennium of microseconds is room for any number of later writes).
LATEST_WRITE = 221_845_392_000_000_000
NOT_A_MEMBER = "you are not a member of this room (or it does not exist)"


def deadline(seconds: float) -> Timeout:
    """The error of a request stopped at its deadline (both engines)."""
    return Timeout(
        f"the request ran past its {seconds:g} s limit and was stopped; ask for less (fewer or rarer words, a smaller top_k)",
        details={"reason": "deadline", "limit_seconds": seconds},
    )


class Database:
    """One store of either engine: its connection, transactions and buckets, the base of every operation.

    Attributes:
        dialect: how the engine spells what the shared statements leave to it (`engine.dialect`).
        identity: what watermarks of this store are keyed by (a path, or a URL without its password).
        db: the connection of the current block (PostgreSQL's speaks sqlite3's `execute`/`executemany`).
        secret: the store's cursor secret.
        language: the search's stemmer (changed only by `reindex_search`).
        stream_rows: the rows of a stream's chunk when its caller does not say (`stream`).
    """

    dialect: Dialect
    identity: str
    db: sqlite3.Connection
    secret: bytes
    language: str
    stream_rows: int
    _deadline: float | None  # when the block's time limit passes (`time.monotonic()`), set by `time_limit`
    _limit: float | None  # the seconds of that limit

    # -- what each engine implements ----------------------------------------------------------

    def close(self) -> None:
        raise NotImplementedError

    def reading(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection for reads (one statement is one snapshot), held by this thread meanwhile."""
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction, held by this thread meanwhile."""
        raise NotImplementedError

    def fetch_all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Every row of one read statement (one snapshot)."""
        raise NotImplementedError

    def bounded_rows(
        self, sql: str, params: tuple[Any, ...], count: int, max_bytes: int, wire: int, spliced: bool, order: str
    ) -> tuple[list[Any], bool]:
        """The first rows of a statement ending in `LIMIT ?` (given `count + 1`): at most `count`, and while the
        items they make total at most `max_bytes` of UTF-8 (`feed.item_bytes`; the first row is kept whatever
        its size), and whether more rows follow. Column `wire` is the wire text, followed by `superseded_by`
        when `spliced`; `order` is the statement's order by its column names."""
        raise NotImplementedError

    def stream(self, sql: str, params: list[Any] | tuple[Any, ...], chunk: int) -> Iterator[list[Any]]:
        """Every row of one statement, in chunks of `chunk` rows (the last one shorter), from one snapshot."""
        raise NotImplementedError

    def time_limit(self, seconds: float | None) -> AbstractContextManager[None]:
        """Stop any statement run inside the block once `seconds` have passed (`Timeout`); None: no limit."""
        raise NotImplementedError

    def check_time(self) -> None:
        """Raise `Timeout` when the block's time limit has passed: what a loop of Python inside a request
        calls between steps (the engines stop statements, not Python)."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise deadline(self._limit or 0.0)

    def _check_file(self) -> None:
        """Raise Unavailable when what the store was opened on is gone (a store file replaced; nothing on a server)."""

    def index_mark(self, db: sqlite3.Connection) -> int:
        """Where the search index stands before a write transaction inserts (see `index_since`)."""
        raise NotImplementedError

    def index_since(self, db: sqlite3.Connection, mark: int) -> None:
        """Index every entry the transaction inserted after `mark` (one pass for a bulk insert)."""
        raise NotImplementedError

    def unindex(self, db: sqlite3.Connection, rows: list[tuple[int, int, str, str]]) -> None:
        """Drop deleted entries, given as (seq, bucket, content, concepts), from the search index."""
        raise NotImplementedError

    def index_columns(self, bucket: int, content: str, concepts: tuple[str, ...] = ()) -> tuple[str, ...]:
        """Values of the dialect's own atom columns (`Dialect.atom_columns`) for a new entry."""
        raise NotImplementedError

    def reindex_search(self, language: str) -> int:
        """Make `language` the store's search language and index every entry again in it; returns how many."""
        raise NotImplementedError

    # -- shared: the clock, buckets (a principal's own store, or a room) ----------------------

    def clock(self, db: sqlite3.Connection) -> Clock:
        """The clock of one write transaction."""
        return Clock(db, self.dialect)

    def own_bucket(self, principal: str, *, create: bool = False) -> int | None:
        """The principal's own bucket (created on a first write when `create`)."""
        row = self.db.execute("SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?", (principal,)).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        return self.create_bucket("own", principal)

    def create_bucket(self, kind: str, owner: str) -> int:
        """A new bucket (inside a transaction)."""
        cur = self.db.execute("INSERT INTO buckets(kind, owner) VALUES (?, ?)", (kind, owner))
        return int(cur.lastrowid or 0)

    def membership(self, principal: str, room_id: str) -> tuple[int, str]:
        """The bucket of a room the principal is a member of, and the membership's scope.

        Raises:
            Forbidden: not a member, or no such room (the same answer).
        """
        row = self.db.execute(
            "SELECT r.bucket, m.scope FROM members m JOIN rooms r ON r.room_id = m.room_id "
            "WHERE m.room_id = ? AND m.principal = ?",
            (room_id, principal),
        ).fetchone()
        if row is None:
            raise Forbidden(NOT_A_MEMBER)
        return int(row[0]), str(row[1])

    def writable_bucket(self, principal: str, domain: str) -> int:
        """The bucket a write to `domain` goes to (inside the write transaction).

        Raises:
            Forbidden: a room one is not a member of, or only a read-only member of.
        """
        room_id = room_of(domain)
        if room_id is None:
            bucket = self.own_bucket(principal, create=True)
            assert bucket is not None
            return bucket
        bucket, scope = self.membership(principal, room_id)
        if scope != "read_write":
            raise Forbidden("your membership of this room is read-only")
        return bucket

    def require_owner(self, principal: str, room_id: str, doing: str) -> None:
        """Raises Forbidden unless the principal owns the room (`doing`: what only an owner may, for the message)."""
        row = self.db.execute(
            "SELECT role FROM members WHERE room_id = ? AND principal = ?", (room_id, principal)
        ).fetchone()
        if row is None:
            raise Forbidden(NOT_A_MEMBER)
        if row[0] != "owner":
            raise Forbidden(f"only the room's owner can {doing}")

    def room_bucket(self, principal: str, room_id: str) -> int:
        """The bucket of a room the principal is a member of (Forbidden otherwise)."""
        return self.membership(principal, room_id)[0]

    def require_member(self, principal: str, room_id: str) -> None:
        """Raises Forbidden unless the principal is a member of the room (an unknown room answers the same)."""
        self.membership(principal, room_id)


class Clock:
    """The engine's clock, inside one write transaction: `created_at` strictly increasing per bucket.

    Each bucket's last instant is read once, advanced in memory and written back by `save`, so a
    write of one entry and a bulk insert of a million keep the same promise: no entry is ever
    committed behind a reader's cursor or watermark, whatever the writers' clocks say (SQLite's
    write lock serialises the transactions that hold a `Clock`; on PostgreSQL the bucket's row lock does).
    """

    def __init__(self, db: sqlite3.Connection, dialect: Dialect) -> None:
        self.db = db
        self.last: dict[int, int] = {}
        # PostgreSQL: the bucket's row stays locked to commit, so two servers writing one bucket are
        # serialised (the second reads the first's instant once it has committed, and stamps after it).
        self.read_last = f"SELECT last_created_at FROM buckets WHERE bucket = ?{dialect.row_lock}"

    def next(self, bucket: int, wanted: int) -> int:
        """The instant for a new entry of `bucket`: `max(wanted, last + 1)`.

        Raises:
            ValidationError: the writer's clock reads past `LATEST_WRITE` (see there).
        """
        if wanted > LATEST_WRITE:
            raise ValidationError(
                f"this machine's clock reads {timefmt.to_iso(min(wanted, timefmt.MAX_US))}: the store takes no entry "
                "stamped after 9000-01-01; fix the clock and write again"
            )
        last = self.last.get(bucket)
        if last is None:
            last = int(self.db.execute(self.read_last, (bucket,)).fetchone()[0])
        created = max(wanted, last + 1)
        self.last[bucket] = created
        return created

    def save(self) -> None:
        """Write every advanced bucket's last instant back (before the transaction commits)."""
        self.db.executemany(
            "UPDATE buckets SET last_created_at = ? WHERE bucket = ?", [(t, b) for b, t in self.last.items()]
        )
