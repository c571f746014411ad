"""Provides `PgStore`: the engine over PostgreSQL (psycopg 3 and psycopg_pool), for `mnemo serve` past one machine.

It is the embedded engine's operations (engine/feed.py, atoms.py, memory.py, rooms.py, vault.py,
keys.py) over a different `Database`: the same statements, written with `?` and sent with `%s`,
and the few places where the databases differ overridden here (the clock's per-bucket row lock,
full-text search, one-snapshot streams, the change token). Any number of servers may share one
database: everything a server knows (the cursor secret, key hashes, rooms, the vault) lives in it.
This module is the one owner of psycopg.
"""

from __future__ import annotations

import threading
import time
import weakref
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from functools import lru_cache
from typing import Any

import psycopg
import psycopg.errors
from psycopg import conninfo as pg_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from mnemo_tui.dburl import database_identity
from mnemo_tui.engine import fts
from mnemo_tui.engine import pg_schema as schema
from mnemo_tui.engine.atoms import AtomOps, insert_sql
from mnemo_tui.engine.consumers import ConsumerOps
from mnemo_tui.engine.database import Clock, Database, deadline
from mnemo_tui.engine.feed import SPLICE_BYTES, FeedOps, Matching
from mnemo_tui.engine.follow import FollowOps
from mnemo_tui.engine.keys import KeyOps
from mnemo_tui.engine.memory_plane import MemoryOps
from mnemo_tui.engine.pg_search import query, vector
from mnemo_tui.engine.rooms import RoomOps
from mnemo_tui.engine.rules import refuse_nul
from mnemo_tui.engine.vault import VaultOps
from mnemo_tui.errors import Conflict, FateUnknown, LocalStateError, MnemoError, Unavailable, ValidationError

DEFAULT_POOL = 8
CONNECT_SECONDS = 5.0  # to get a connection from the pool (the database down: 503 after this)
MIGRATION_LOCK = 0x6D6E656D6F  # the advisory lock migrations are applied under ("mnemo")
OWN_BUCKETS_KEPT = 10_000  # principals whose own bucket an engine remembers
PREPARE_AFTER = 5  # psycopg's own threshold: a statement run this often on a connection is prepared
# The statement_timeout of each pooled connection whose session is mnemo's own (no transaction pooler), set
# only when it changes.
_TIMEOUTS: weakref.WeakKeyDictionary[psycopg.Connection[Any], int] = weakref.WeakKeyDictionary()
_MIGRATED: set[str] = set()  # URLs whose schema this process found current (checked once per process)


def _parts(url: str) -> dict[str, Any]:
    try:
        return dict(pg_conninfo.conninfo_to_dict(url))
    except psycopg.ProgrammingError:
        raise ValidationError("the database URL is malformed (expected postgresql://USER@HOST:PORT/DBNAME)") from None


def redacted(url: str) -> str:
    """The database URL as it may be shown, logged and used as an identity: never its password (see dburl)."""
    return database_identity(url)


def _scrub(url: str, text: str) -> str:
    """A driver message with the URL's password (if any) taken out."""
    try:
        password = _parts(url).get("password")
    except ValidationError:
        return "(a message about a malformed database URL)"
    return text.replace(str(password), "***") if password else text


@lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    """A statement written with `?` parameters (as every shared statement is), with psycopg's `%s`."""
    return sql.replace("%", "%%").replace("?", "%s")


def _param(value: Any) -> Any:
    # PostgreSQL's text holds no NUL. Text to be stored is refused before (rules.refuse_nul); any other NUL
    # is refused here too, never mapped to another character, which made two different texts one.
    if isinstance(value, str) and "\x00" in value:
        refuse_nul("a text", value)
    return value


def _params(params: Any) -> Any:
    return [_param(p) for p in params]


class PgConnection:
    """One pooled connection, spoken to as the shared statements expect (`execute`, `executemany`)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.conn.execute(_pg(sql), _params(params))

    def executemany(self, sql: str, rows: Any) -> None:
        rows = [_params(r) for r in rows]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(_pg(sql), rows)


IDLE_CHECK_SECONDS = 2.0  # a connection idle longer is pinged when checked out (a restarted database is noticed)
_LAST_USED: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = weakref.WeakKeyDictionary()


def _check_if_idle(conn: psycopg.Connection[Any]) -> None:
    """The pool's check on checkout: a round trip only for a connection idle for a while.

    A connection in steady use is known good; one that sat idle may have been cut (a database
    restart, a proxy's idle timeout) and is replaced here instead of failing a request.
    """
    if time.monotonic() - _LAST_USED.get(conn, 0.0) > IDLE_CHECK_SECONDS:
        ConnectionPool.check_connection(conn)


class _Pools:
    """One connection pool per database URL in a process, shared by every engine (thread) over it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pools: dict[tuple[str, bool], tuple[ConnectionPool[Any], int]] = {}

    def acquire(self, url: str, size: int, pooled: bool = True) -> ConnectionPool[Any]:
        """The pool of `url`; statements run often are prepared unless `pooled` (behind a transaction pooler)."""
        with self.lock:
            found = self.pools.get((url, pooled))
            if found is None:
                pool: ConnectionPool[Any] = ConnectionPool(
                    url,
                    min_size=1,
                    max_size=max(1, size),
                    kwargs={"autocommit": True, "prepare_threshold": None if pooled else PREPARE_AFTER},
                    check=_check_if_idle,
                    timeout=CONNECT_SECONDS,
                    num_workers=1,
                    open=False,
                    name="mnemo",
                )
                try:
                    pool.open(wait=True, timeout=CONNECT_SECONDS)
                except PoolTimeout:
                    pool.close()
                    raise Unavailable(
                        f"the database {redacted(url)} cannot be reached (no connection within {CONNECT_SECONDS:g} s)"
                    ) from None
                found = (pool, 0)
            self.pools[(url, pooled)] = (found[0], found[1] + 1)
            return found[0]

    def release(self, url: str, pooled: bool = True) -> None:
        with self.lock:
            pool, count = self.pools[(url, pooled)]
            if count > 1:
                self.pools[(url, pooled)] = (pool, count - 1)
                return
            del self.pools[(url, pooled)]
        pool.close()


POOLS = _Pools()


async def listening(url: str) -> Any:
    """An autocommit connection of its own for LISTEN (server/wake.py); Unavailable (no password) if not."""
    try:
        return await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        raise Unavailable(_scrub(url, str(exc))) from None


def _reason(url: str, exc: BaseException) -> str:
    """A driver failure's first line, the URL's password scrubbed."""
    return _scrub(url, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)


def failure(url: str, exc: BaseException, limit: float | None = None) -> MnemoError | None:
    """The mnemo error a driver failure means (None: a bug, left to the caller's 500), password scrubbed."""
    text = _reason(url, exc)
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return deadline(limit if limit is not None else 0.0)
    if isinstance(exc, psycopg.errors.TransactionRollback):  # a deadlock or serialization failure
        return Unavailable("the write met a concurrent one and was rolled back; retry it")
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return Conflict("a concurrent write made the same thing first; retry to see it")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return Unavailable(f"the database {redacted(url)} is read-only (a replica?): point mnemo at the primary")
    if isinstance(exc, PoolTimeout | psycopg.OperationalError):
        return Unavailable(f"the database {redacted(url)} is unavailable ({text}); retry shortly")
    if isinstance(exc, psycopg.DataError):
        return ValidationError(f"the database refused a value: {text}")
    return None


def migrate(url: str, *, allowed: bool, upto: int = schema.LATEST) -> int:
    """Initialize an empty database, or apply pending migrations when `allowed`, under an advisory lock.

    Two servers starting at once cannot both migrate: each migration's transaction takes the lock
    (`pg_advisory_xact_lock`, released at its commit, so it holds behind a transaction pooler as well)
    and reads the version again under it; the second server finds the work done. `upto` stops at an
    older schema (what an older mnemo made: rehearsals, tests). Returns the schema version.

    Raises:
        LocalStateError: an older schema without `allowed` (`--migrate`), or a newer one.
    """
    # Never prepared: behind a transaction pooler the next transaction may be on another server connection.
    with psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_SECONDS), prepare_threshold=None) as conn:
        db = PgConnection(conn)
        version = _version(db)
        if version == upto:
            if version >= 5 and fts.pending(db) is not None:
                if not allowed:
                    raise LocalStateError(
                        f"the search index of the database {redacted(url)} is being rebuilt (or its rebuild was "
                        "stopped): start one server with `mnemo serve --migrate` to finish it (the others wait for it)"
                    )
                reindex(conn)
            return version
        # An empty database is initialized whole, by whichever server gets each migration's lock first.
        initializing = version == 0
        for number, _name, fn in schema.MIGRATIONS:
            if number > upto:
                break
            with conn.transaction():
                db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
                version = _version(db)
                if version > schema.LATEST:
                    raise LocalStateError(
                        f"the database {redacted(url)} was written by a newer mnemo (schema {version}, this one "
                        f"knows {schema.LATEST}); upgrade mnemo"
                    )
                if number <= version:
                    continue
                if 0 < version < upto and not (allowed or initializing):
                    raise LocalStateError(
                        f"the database {redacted(url)} has schema {version} and this mnemo needs {schema.LATEST}: "
                        "back it up, then start one server with `mnemo serve --migrate` (the others wait for it)"
                    )
                if number == 1:
                    db.execute("CREATE TABLE mnemo_schema (version integer NOT NULL)")
                    db.execute("INSERT INTO mnemo_schema(version) VALUES (0)")
                fn(db)
                db.execute("UPDATE mnemo_schema SET version = ?", (number,))
                version = number
        if version >= 5:
            reindex(conn)
    return version


def _version(db: PgConnection) -> int:
    if not _table(db, "mnemo_schema"):
        if _table(db, "atoms"):
            raise LocalStateError("the database holds tables named like mnemo's but no mnemo schema: use another")
        return 0
    return int(db.execute("SELECT version FROM mnemo_schema").fetchone()[0])


# Whether a table is in the schema tables are created in, read from pg_class under the statement's own snapshot.
# Not `to_regclass`: it looks names up in the session's catalog cache without a lock, so a miss cached before
# the migration lock was waited for (another server creating the schema meanwhile) still reads as missing
# after it, and CREATE TABLE mnemo_schema then fails with "already exists" (issue 50).
_TABLE = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname = ? AND n.nspname = current_schema())"
)


def _table(db: PgConnection, name: str) -> bool:
    return bool(db.execute(_TABLE, (name,)).fetchone()[0])


def reindex(conn: psycopg.Connection[Any], batch: int | None = None) -> int:
    """Make the tsvector of every entry a reindex has not reached yet, `batch` a transaction, then build the
    search index; returns how many entries were indexed.

    Each batch takes the migration lock and records how far it reached in its own transaction, so a
    reindex stopped anywhere goes on from there at the next `--migrate`, and two servers migrating at
    once share the work. Entries written meanwhile carry their tsvector from their own write.
    """
    import logging

    log = logging.getLogger("mnemo.engine")
    db = PgConnection(conn)
    indexed, said = 0, 0
    while True:
        with conn.transaction():
            db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            language = fts.language_of(db)
            found = fts.next_batch(db, batch or fts.REINDEX_BATCH)
            if found is None:
                return indexed
            rows, reached, done = found
            db.execute(
                "UPDATE atoms AS a SET search = v.search::tsvector FROM unnest(?::bigint[], ?::text[]) AS v(seq, search) "
                "WHERE a.seq = v.seq",
                ([r[0] for r in rows], [vector(r[1], r[2], r[3], language) for r in rows]),
            )
            if done:
                db.execute(schema.SEARCH_INDEX)
        indexed += len(rows)
        said = fts.tell_reindex(log, said, indexed, done, language, reached)
        if done:
            return indexed


class PgClock(Clock):
    """The clock over PostgreSQL: a bucket's last instant is read `FOR UPDATE`, so the row lock is held to commit.

    Two transactions writing one bucket, on any servers, are thereby serialised: the second reads
    the first's committed instant only once the first has committed, and stamps after it.
    """

    READ_LAST = "SELECT last_created_at FROM buckets WHERE bucket = ? FOR UPDATE"


class PgDatabase(Database):
    """One PostgreSQL database through a shared pool; the `Database` the embedded engine's operations run on.

    Attributes:
        url: the database URL as given (with its password: never shown; see `redacted`).
        identity: the URL without its password (`dburl`), what watermarks are keyed by.
    """

    stream_rows = 2000  # a chunk is a round trip to the server here

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

    def _check_file(self) -> None:
        return None

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
        """`FeedOps.bounded_rows` in one round trip: the database sums the items' bytes (as `item_bytes`
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
        """One write transaction (READ COMMITTED; a bucket's writers are ordered by its row lock, see `PgClock`).

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

    # -- what differs from SQLite ----------------------------------------------------------
    def clock(self, db: Any) -> Clock:
        return PgClock(db)

    def index_mark(self, db: Any) -> int:
        return 0  # each row carries its own tsvector, written by the insert

    def index_since(self, db: Any, mark: int) -> None:
        return None

    def unindex(self, db: Any, rows: list[tuple[int, int, str, str]]) -> None:
        return None  # the tsvector goes with its row

    EXTRA_ATOM_COLUMNS = ("search",)

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

    def each_concept(self, alias: str) -> str:
        return f"jsonb_array_elements_text(a.concepts::jsonb) AS {alias}(value)"

    def one_of(self, column: str, values: list[str]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: one array parameter."""
        return f"{column} = ANY(?::text[])", [values]

    def stream(self, sql: str, params: list[Any] | tuple[Any, ...], chunk: int) -> Iterator[list[Any]]:
        """Every row of one statement through a server-side cursor, in chunks, from one snapshot."""
        # Its own connection, never this thread's block's: the stream may be read while other calls run.
        with self._checkout() as conn, self._limited(conn), conn.cursor(name="mnemo_stream") as cur:
            cur.execute(_pg(sql), _params(params))
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
        """The bucket a write goes to, locked until commit before anything of it is read (see `PgClock`).

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
    INSERT = insert_sql(PgDatabase.EXTRA_ATOM_COLUMNS).replace("?,?)", "?,?::tsvector)")
    BY_PREFIX = AtomOps.BY_PREFIX.replace("CROSS JOIN", "JOIN")  # PostgreSQL orders joins itself

    def matching(self, bucket: int, words: list[str]) -> Matching | None:
        """PostgreSQL's full-text search: `@@` on the bucket-stamped tsvector, ranked by `ts_rank`."""
        expression = query(bucket, words, self.language)
        if not expression:
            return None
        return Matching(
            score="ts_rank(a.search, ?::tsquery)",
            source="atoms a",
            condition="a.search @@ ?::tsquery",
            params=[expression],
            leading=[expression],
        )


# -- moving an embedded store into PostgreSQL ----------------------------------------------------


def copy_store(source: Any, url: str) -> dict[str, int]:
    """Copy an embedded store (an open `Store`) into the PostgreSQL database at `url`, exactly.

    Ids, times, buckets and their clocks, rooms, members, invites, keys, the vault, supersession,
    feedback, remembered answers and the cursor secret move as they are, so cursors issued by the
    store continue on the database. The store is read in one snapshot; the database is written in
    one transaction (all or nothing). Returns the rows copied per table.

    Raises:
        Conflict: the database already holds data (nothing is written).
        Unavailable: the database cannot be reached.
    """
    target = PgStore(url)
    counts: dict[str, int] = {}
    try:
        with target._checkout() as conn, source.reading() as src:
            db = PgConnection(conn)
            for table in schema.HOLDS_DATA:
                if db.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
                    raise Conflict(
                        f"the database {target.identity} already holds data ({table}); "
                        "copy into an empty database (the copy never merges)"
                    )
            src.execute("BEGIN")  # one snapshot of the store for the whole copy
            try:
                with conn.transaction():
                    for key, value in src.execute("SELECT key, value FROM meta"):
                        db.execute(
                            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            (key, bytes(value)),
                        )
                    for table, columns in schema.COPIED:
                        extra = ", search" if table == "atoms" else ""
                        counts[table] = 0
                        with conn.cursor().copy(f"COPY {table} ({columns}{extra}) FROM STDIN") as out:
                            for row in src.execute(f"SELECT {columns} FROM {table}"):
                                # An older store may hold a NUL, which PostgreSQL's text cannot: U+FFFD instead.
                                values = [v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in row]
                                if table == "atoms":
                                    # bucket, content, concepts, in the store's language (its meta, copied above)
                                    values.append(vector(int(row[2]), str(row[5]), str(row[6]), source.language))
                                out.write_row(values)
                                counts[table] += 1
                    for table, column in (("buckets", "bucket"), ("atoms", "seq")):
                        db.execute(
                            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                            f"greatest((SELECT max({column}) FROM {table}), 1))"
                        )
            finally:
                src.execute("COMMIT")
    except (psycopg.Error, PoolTimeout) as exc:
        raise failure(url, exc) or Unavailable("the copy failed") from None
    finally:
        target.close()
    return counts
