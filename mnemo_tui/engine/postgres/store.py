"""Provides `PgStore`: the engine over PostgreSQL (psycopg 3 and psycopg_pool), for `mnemo serve` past one machine.

It is the operations of engine/ (feed.py, atoms.py, memory_plane.py, rooms.py, vault.py, keys.py)
over another `Database`: the same statements, spelled by `engine.dialect.POSTGRES`, and what a
server's database does its own way implemented here (transactions on a pool, time limits by
`statement_timeout`, the per-bucket row lock, one-snapshot streams, the change token). Any number
of servers may share one database: everything a server knows (the cursor secret, key hashes,
rooms, the vault) lives in it.
"""

from __future__ import annotations

import time
import weakref
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from mnemo_tui.engine import fts
from mnemo_tui.engine.atoms import AtomOps
from mnemo_tui.engine.base import Database
from mnemo_tui.engine.consumers import ConsumerOps
from mnemo_tui.engine.dialect import POSTGRES
from mnemo_tui.engine.feed import SPLICE_BYTES, FeedOps, Matching
from mnemo_tui.engine.follow import FollowOps
from mnemo_tui.engine.keys import KeyOps
from mnemo_tui.engine.memory_plane import MemoryOps
from mnemo_tui.engine.postgres import schema
from mnemo_tui.engine.postgres.migrations import _MIGRATED, MIGRATION_LOCK, migrate, reindex
from mnemo_tui.engine.postgres.pools import (
    _LAST_USED,
    DEFAULT_POOL,
    POOLS,
    PgConnection,
    _params,
    _reason,
    failure,
    redacted,
)
from mnemo_tui.engine.postgres.search import matching, vector
from mnemo_tui.engine.rooms import RoomOps
from mnemo_tui.engine.vault import VaultOps
from mnemo_tui.errors import FateUnknown, Unavailable

OWN_BUCKETS_KEPT = 10_000  # principals whose own bucket an engine remembers
# The statement_timeout of each pooled connection whose session is mnemo's own (no transaction pooler), set
# only when it changes.
_TIMEOUTS: weakref.WeakKeyDictionary[psycopg.Connection[Any], int] = weakref.WeakKeyDictionary()


class PgDatabase(Database):
    """One PostgreSQL database through a shared pool; the `Database` the embedded engine's operations run on.

    Attributes:
        url: the database URL as given (with its password: never shown; see `redacted`).
        identity: the URL without its password (`dburl`), what watermarks are keyed by.
    """

    stream_rows = 2000  # a chunk is a round trip to the server here
    dialect = POSTGRES

    def __init__(
        self, url: str, *, migrate_schema: bool = False, pool_size: int = DEFAULT_POOL, pooled: bool = True
    ) -> None:
        self.identity = redacted(url)  # first: a malformed URL is refused before anything connects
        self.url = url
        self.pooled = pooled  # behind a transaction pooler (the default), or every session is this pool's own
        self._writes = 0  # write blocks this thread is inside
        self._limit: float | None = None
        self._deadline: float | None = None
        self._own: dict[str, int] = {}
        self._current: PgConnection | None = None
        try:
            if url not in _MIGRATED:
                migrate(url, allowed=migrate_schema)
                _MIGRATED.add(url)
            self.pool = POOLS.acquire(url, pool_size, pooled)
        except psycopg.Error as exc:
            opened = Unavailable(f"the database {self.identity} cannot be opened ({_reason(url, exc)})")
            raise failure(url, exc) or opened from None
        self._closed = False
        try:
            with self.reading() as db:
                self.secret = bytes(db.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()[0])
                self.language = fts.language_of(db)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            POOLS.release(self.url, self.pooled)

    @property  # type: ignore[override]
    def db(self) -> PgConnection:
        """The connection of the block this thread is in (`reading` or `transaction`)."""
        assert self._current is not None, "a statement outside reading() or transaction()"
        return self._current

    @db.setter
    def db(self, value: Any) -> None:  # pragma: no cover - set by the embedded engine only
        raise AttributeError("a PostgreSQL engine's connection comes from its pool")

    @contextmanager
    def _checkout(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool for the block; driver failures translated."""
        try:
            with self.pool.connection() as conn:
                try:
                    yield conn
                finally:
                    _LAST_USED[conn] = time.monotonic()
        except (psycopg.Error, PoolTimeout) as exc:
            translated = failure(self.url, exc, self._limit)
            if translated is None:
                raise
            raise translated from None

    @contextmanager
    def _connection(self) -> Iterator[PgConnection]:
        """The connection of this thread's block (the one already held when nested)."""
        if self._current is not None:
            yield self._current
            return
        with self._checkout() as conn:
            self._current = PgConnection(conn)
            try:
                yield self._current
            finally:
                self._current = None

    @contextmanager
    def _limited(self, conn: psycopg.Connection[Any], *, write: bool = True) -> Iterator[None]:
        """A block whose statements stop past this engine's time limit: one transaction (a read's, unless
        `write` is False and the session is this pool's own: then autocommit, one statement one snapshot).

        Behind a transaction pooler the limit is `SET LOCAL`: it ends with the transaction, so nothing
        of it is left on the server connection for whoever pgbouncer hands it to next; BEGIN and the SET
        go in one round trip (no parameters: psycopg sends them as one simple query). In a session of
        its own (`pooled` False) it is the session's, set only when it changes: no round trip at all.
        """
        wanted = 0 if self._limit is None else max(1, int(self._limit * 1000))
        if not self.pooled:
            if _TIMEOUTS.get(conn) != wanted:
                conn.execute(f"SET statement_timeout = {wanted}")
                _TIMEOUTS[conn] = wanted
            with conn.transaction() if write else nullcontext():
                yield
            return
        conn.execute(f"BEGIN; SET LOCAL statement_timeout = {wanted}")
        try:
            yield
        except BaseException:
            if not conn.broken:
                with suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[PgConnection]:  # type: ignore[override]
        """A connection for reads: READ COMMITTED, so one statement is one snapshot (as on SQLite)."""
        if self._current is not None:
            yield self._current
            return
        with self._connection() as db, self._limited(db.conn, write=False):
            yield db

    def fetch_all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Every row of one read statement (one snapshot)."""
        with self.reading() as db:
            rows: list[Any] = db.execute(sql, params).fetchall()
            return rows

    def bounded_rows(
        self, sql: str, params: tuple[Any, ...], count: int, max_bytes: int, wire: int, spliced: bool, order: str
    ) -> tuple[list[Any], bool]:
        """`Database.bounded_rows` in one round trip: the database sums the items' bytes (as `item_bytes`
        does) over the statement's rows and sends only those within the bound, so the server never holds
        more than the bound (a client-side cursor receives the whole result)."""
        names = "t.superseded_by" if spliced else "NULL"
        size = f"octet_length(t.wire) + 1 + coalesce(octet_length({names}) + {SPLICE_BYTES}, 0)"
        bounded = (
            f"SELECT * FROM (SELECT t.*, sum({size}) OVER w, row_number() OVER w, count(*) OVER () FROM ({sql}) t "
            f"WINDOW w AS (ORDER BY {', '.join('t.' + part.strip() for part in order.split(','))} "
            "ROWS UNBOUNDED PRECEDING)) u WHERE u.sum <= ? OR u.row_number = 1"
        )
        found = self.fetch_all(bounded, (*params, count + 1, max_bytes))
        rows = [r[:-3] for r in found[:count]]
        total = int(found[0][-1]) if found else 0
        return rows, total > len(rows)

    @contextmanager
    def transaction(self) -> Iterator[PgConnection]:  # type: ignore[override]
        """One write transaction (READ COMMITTED; a bucket's writers are ordered by its row lock, see `base.Clock`).

        Nested in another block, a savepoint. A connection lost at COMMIT leaves the write's fate
        unknown (`FateUnknown`, never retried blindly): only then may it be stored without an answer.
        """
        self._writes += 1
        try:
            if self._current is not None:
                with self._current.conn.transaction():
                    yield self._current
                return
            with self._connection() as db:
                committing = False
                try:
                    with self._limited(db.conn):
                        yield db
                        committing = True
                except psycopg.OperationalError as exc:
                    if committing:
                        raise FateUnknown(
                            f"the connection to the database {self.identity} was lost while the write committed: "
                            "it may or may not be stored; read before writing it again",
                            details={"reason": "commit_unknown"},
                        ) from exc
                    raise
        finally:
            self._writes -= 1

    @contextmanager
    def time_limit(self, seconds: float | None) -> Iterator[None]:
        """Every statement run inside the block is stopped by the server past `seconds` (`statement_timeout`)."""
        previous = self._limit, self._deadline
        self._limit = seconds
        self._deadline = None if seconds is None else time.monotonic() + seconds
        try:
            yield
        finally:
            self._limit, self._deadline = previous

    def never_wait(self) -> bool:
        """Every call is a round trip to the server: none is made on an event loop."""
        return False

    def checkpoint(self) -> None:
        """PostgreSQL checkpoints by itself."""

    def briefly(self) -> AbstractContextManager[None]:
        raise NotImplementedError("a PostgreSQL engine never answers on an event loop (never_wait is False)")

    def ping(self) -> None:
        with self.reading() as db:
            db.execute("SELECT count(*) FROM meta").fetchone()

    # -- the search index: a tsvector column of atoms (engine/postgres/search.py) ---------------

    def index_mark(self, db: Any) -> int:
        return 0  # each row carries its own tsvector, written by the insert

    def index_since(self, db: Any, mark: int) -> None:
        return None

    def unindex(self, db: Any, rows: list[tuple[int, int, str, str]]) -> None:
        return None  # the tsvector goes with its row

    def index_columns(self, bucket: int, content: str, concepts: tuple[str, ...] = ()) -> tuple[str, ...]:
        return (vector(bucket, content, concepts, self.language),)

    def reindex_search(self, language: str) -> int:
        """Make `language` the database's search language and make every entry's tsvector again (see
        `reindex`): with every other server stopped, which would otherwise go on stemming in the old one."""
        fts.stemmer(language)  # refuses an unknown language before anything changes
        with self._checkout() as conn:
            with conn.transaction():
                PgConnection(conn).execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
                schema.rebuild_search(PgConnection(conn), language)
            self.language = language
            return reindex(conn)

    def stream(self, sql: str, params: list[Any] | tuple[Any, ...], chunk: int) -> Iterator[list[Any]]:
        """Every row of one statement through a server-side cursor, in chunks, from one snapshot."""
        # Its own connection, never this thread's block's: the stream may be read while other calls run.
        with self._checkout() as conn, self._limited(conn), conn.cursor(name="mnemo_stream") as cur:
            cur.execute(POSTGRES.sql(sql), _params(params))
            while True:
                rows = cur.fetchmany(chunk)
                if not rows:
                    return
                yield rows

    def own_bucket(self, principal: str, *, create: bool = False) -> int | None:
        """The principal's own bucket, remembered once found: an own bucket's id never changes and it is
        never deleted, so every read after the first spares the database a round trip."""
        found = self._own.get(principal)
        if found is None:
            found = super().own_bucket(principal, create=create)
            # Only what is committed is remembered: a bucket made in a transaction may yet be rolled back.
            committed = self._writes == 0
            if found is not None and committed and len(self._own) < OWN_BUCKETS_KEPT:
                self._own[principal] = found
        return found

    def create_bucket(self, kind: str, owner: str) -> int:
        """A new bucket, or the one a concurrent transaction just made for the same owner."""
        self.db.execute(
            "INSERT INTO buckets(kind, owner) VALUES (?, ?) ON CONFLICT (kind, owner) DO NOTHING", (kind, owner)
        )
        return int(
            self.db.execute("SELECT bucket FROM buckets WHERE kind = ? AND owner = ?", (kind, owner)).fetchone()[0]
        )

    def writable_bucket(self, principal: str, domain: str) -> int:
        """The bucket a write goes to, locked until commit before anything of it is read (see `base.Clock`).

        Locked first, so a repeated `external_ref` or a supersession checked next is checked
        against every commit of the bucket before this one.
        """
        bucket = super().writable_bucket(principal, domain)
        self.db.execute("SELECT 1 FROM buckets WHERE bucket = ? FOR UPDATE", (bucket,))
        return bucket

    def change_token(self) -> tuple[int, int]:
        """A token that moves whenever any transaction of the cluster starts writing or ends (never misses a commit)."""
        with self.reading() as db:
            snapshot = str(db.execute("SELECT pg_current_snapshot()::text").fetchone()[0])
        return zlib.crc32(snapshot.encode()), len(snapshot)

    def notify(self, channel: str, payload: str) -> None:
        """`pg_notify(channel, payload)` on a connection of the pool of its own, by itself: autocommit, or its own
        short transaction behind a transaction pooler. Never inside a write's transaction (a NOTIFY inside one
        serialises every commit of the cluster, and would wake the listeners before the write is there)."""
        if self._writes:
            raise RuntimeError("a NOTIFY inside a write's transaction: send it after the commit")
        with self._checkout() as conn, self._limited(conn, write=False):
            conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


class PgStore(PgDatabase, FeedOps, FollowOps, MemoryOps, RoomOps, AtomOps, VaultOps, KeyOps, ConsumerOps):
    """The PostgreSQL engine: an implementation of `engine.interface.Engine` over one database.

    Open one per thread (as the server does); they share one connection pool per URL.
    """

    kind = "postgres"

    def matching(self, bucket: int, words: list[str]) -> Matching | None:
        """PostgreSQL's full-text search (engine/postgres/search.py)."""
        return matching(bucket, words, self.language)
