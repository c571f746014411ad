"""Provides `SqliteDatabase`: the embedded store's connection, the file, its transactions and its search index."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from operator import itemgetter
from threading import RLock
from typing import TYPE_CHECKING

from mnemo_tui.engine import fts
from mnemo_tui.engine.base import Database, deadline
from mnemo_tui.engine.dialect import SQLITE
from mnemo_tui.engine.feed import FEED_ORDER, item_bytes, joined
from mnemo_tui.engine.sqlite.schema import LATEST, migrate
from mnemo_tui.engine.sqlite.walk_sql import page_sql, position_sql
from mnemo_tui.errors import LocalStateError, Unavailable, WouldWait
from mnemo_tui.sqlitefile import create_whole, immediate, long_enough, user_version

if TYPE_CHECKING:
    from typing import Any

    from mnemo_tui.engine.feed import FeedPlan, Joined
    from mnemo_tui.files import StrPath

BUSY_TIMEOUT_MS = 30_000
# None bound as NULL by an adapter: without one, `sqlite3` looks for the protocol's `__adapt__` first and builds
# and drops an AttributeError for every None parameter (a write has six: ~15k instructions).
sqlite3.register_adapter(type(None), lambda value: None)
BOUNDED_STEP = 32  # rows a bounded read takes from SQLite at a time (`bounded_rows`)
# SQLite's page cache while a streamed walk's part is read (`joined_pages`; `cache_size`, negative: KiB): a
# walk reads each page of the store once (the system's cache holds the file), so the default 2 MiB filled on
# every database thread it passed through (16 MiB over the server's eight) and helped no read of it.
WALK_CACHE = -256


def connect(path: str, *, create: bool = True) -> sqlite3.Connection:
    """Open (creating with mode 0600 if needed and `create`) and migrate a store file.

    Raises:
        LocalStateError: when the file exists but is not a readable mnemo store, or is missing and
            may not be created.
    """
    try:
        if not os.path.exists(path):
            if not create:
                raise LocalStateError(
                    f"the store file {path} was removed or replaced while it was open (it does not exist any more); "
                    "nothing is read or written"
                )
            create_whole(path, lambda tmp: _open(tmp)[0].close())
        elif not long_enough(path):
            # mnemo never leaves a store file shorter than a page (see create_whole): this one was truncated,
            # and SQLite would silently take it for a new, empty store.
            raise sqlite3.DatabaseError("shorter than one SQLite page: the file was truncated")
        try:
            db, version = _open(path)
        except sqlite3.OperationalError as exc:
            if not _read_only(path, exc):
                raise
            db, version = _open_read_only(path)
    except sqlite3.DatabaseError as exc:
        if "is full" in str(exc) or _no_room(path):
            # Opening writes (the WAL's index, a migration): a full disk fails it, and the store is not damaged.
            raise LocalStateError(
                f"the disk holding store {path} is full ({exc}); the store is intact: free some space and retry"
            ) from None
        if "not a database" in str(exc):
            # SQLite's word for a file that is no SQLite database at all: a wrong path more often than damage.
            raise LocalStateError(
                f"{path} is not a mnemo store (not an SQLite database): check the path (--store, MNEMO_STORE); "
                "if it was your store, it is damaged: move it aside to start a new one"
            ) from None
        raise LocalStateError(
            f"store {path} is unreadable ({exc}); move it aside to start a new store, "
            "or point MNEMO_STORE at a good one"
        ) from None
    except OSError as exc:
        raise LocalStateError(
            f"store {path} cannot be opened ({exc.strerror}); check that its folder exists and is writable, "
            "or point MNEMO_STORE (or --store) elsewhere"
        ) from None
    if version > LATEST:
        db.close()
        raise LocalStateError(f"store {path} was written by a newer mnemo (schema {version}); upgrade mnemo")
    return db


def _no_room(path: str) -> bool:
    """Whether the file system holding the store has no free block left."""
    try:
        return os.statvfs(os.path.dirname(path) or ".").f_bavail == 0
    except OSError:
        return False


def _read_only(path: str, exc: sqlite3.OperationalError) -> bool:
    """Whether a store that exists failed to open only because it, or its folder, cannot be written."""
    readonly = "readonly" in str(exc) or "unable to open" in str(exc)
    folder = os.path.dirname(path) or "."
    return readonly and os.path.isfile(path) and not (os.access(path, os.W_OK) and os.access(folder, os.W_OK))


def _open_read_only(path: str) -> tuple[sqlite3.Connection, int]:
    """A store on a read-only mount (or a file mnemo may not write): readable, every write refused.

    `mode=ro` reads a WAL store whose `-shm` already exists; on a folder where it cannot even be
    created, `immutable=1` reads the file as it is (nothing can be writing it there).
    """
    from urllib.parse import quote

    for flags in ("mode=ro", "mode=ro&immutable=1"):
        db = sqlite3.connect(f"file:{quote(path)}?{flags}", uri=True, isolation_level=None, check_same_thread=False)
        try:
            version = user_version(db)
            db.execute("SELECT count(*) FROM meta").fetchone()
        except sqlite3.OperationalError:
            db.close()
            continue
        if version < LATEST or fts.pending(db) is not None:
            db.close()
            raise LocalStateError(f"store {path} is read-only and was written by an older mnemo: it needs a migration")
        return db, version
    raise sqlite3.OperationalError("unable to open the read-only store")


def _open(path: str) -> tuple[sqlite3.Connection, int]:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA foreign_keys = ON")
        return db, migrate(db)
    except BaseException:
        db.close()
        raise


# One writer at a time per store file in this process: the connections of one process (the server's
# database threads) queue here for the write lock, and the next is woken the moment it is free,
# instead of polling for it in SQLite's busy handler, which sleeps up to 100 ms between tries and
# made the tail of a loaded server. Other processes still meet at SQLite's lock (`BUSY_TIMEOUT_MS`).
class Writer:
    """One store file's write lock in this process, and how many threads are waiting for it."""

    __slots__ = ("_count", "_lock", "waiting")

    def __init__(self) -> None:
        self._lock = RLock()
        self._count = RLock()
        self.waiting = 0

    def acquire(self, blocking: bool) -> bool:
        return bool(self._lock.acquire(blocking))

    def acquire_waiting(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds, counted among the waiting meanwhile."""
        if self._lock.acquire(False):
            return True
        with self._count:
            self.waiting += 1
        try:
            return bool(self._lock.acquire(timeout=timeout))
        finally:
            with self._count:
                self.waiting -= 1

    def release(self) -> None:
        self._lock.release()


_WRITERS: dict[str, Writer] = {}
# A child forked while another thread held one must not inherit it held: it starts with none.
os.register_at_fork(after_in_child=_WRITERS.clear)


def _writer(identity: str) -> Writer:
    found = _WRITERS.get(identity)  # every write asks: a `Writer` (two locks) made only for a new file
    return _WRITERS.setdefault(identity, Writer()) if found is None else found


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class Reading:
    """`SqliteDatabase.reading()`: the lock held around the connection (a class, not a generator: every page pays it)."""

    __slots__ = ("_store",)

    def __init__(self, store: SqliteDatabase) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        self._store.lock.acquire()
        return self._store.db

    def __exit__(self, *exc: object) -> None:
        self._store.lock.release()


# About a millisecond of SQLite's work, far above what a keyset page of 100 entries takes.
BRIEF_STEPS = 100_000
# SQLite calls a progress handler every N steps of a statement counted over all its runs (a cached
# statement's count goes on from one run to the next), not from the start of this one: a handler
# that stopped at its first call stopped one short read in every hundred or so, part done, to be
# done again in a thread. So it is called every BRIEF_TICK steps and stops at its
# BRIEF_STEPS / BRIEF_TICK-th call inside the block.
BRIEF_TICK = 1_000


class Brief:
    """`SqliteDatabase.briefly()`, one per connection (a class, not a generator: every read on the event loop pays it)."""

    __slots__ = ("_db", "_left", "_tick")

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._left = 0
        self._tick = self._count  # the handler, bound once

    def _count(self) -> int:
        self._left -= 1
        return 1 if self._left <= 0 else 0

    def __enter__(self) -> None:
        self._left = BRIEF_STEPS // BRIEF_TICK
        self._db.set_progress_handler(self._tick, BRIEF_TICK)

    def __exit__(self, *exc: object) -> None:
        self._db.set_progress_handler(None, 0)


class SqliteDatabase(Database):
    """One store file and one connection to it: the `Database` of the embedded engine.

    Attributes:
        path: the resolved store file.
        identity: what watermarks of this store are keyed by (the path).
        db: the connection (autocommit: transactions are explicit, see `transaction`).
        secret: the store's cursor secret.
        stream_rows: the rows of a stream's chunk when its caller does not say (`stream`).
    """

    # No round trip to save in-process, and a chunk of ~50 KB of text is what the allocator reuses
    # from one chunk to the next: 2,000 rows (~0.8 MB) were mapped afresh for every chunk, for the
    # rows' strings and again for the text the CLI joins them into (173,000 page faults on an
    # 800,000-entry `recent --all`, against 2,500 with 128 rows, and more than half its time).
    stream_rows = 128
    dialect = SQLITE

    def __init__(self, path: StrPath, *, create: bool = True, memory: bool = False) -> None:
        self.path = os.path.realpath(path)
        self.identity = self.path
        # `memory`: an empty store that lives in this process only, under the path's identity (what a
        # read of a store that does not exist yet sees, without creating a file).
        self.db = _open(":memory:")[0] if memory else connect(self.path, create=create)
        self.secret = bytes(self.db.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()[0])
        self.language = fts.language_of(self.db)  # the search's stemmer (changed only by `reindex_search`)
        self.lock = RLock()
        self._reading = Reading(self)  # one for every read: it holds nothing of a read
        self._brief = Brief(self.db)  # the same: a connection runs one block at a time
        self._file = _file_id(self.path)
        self._deadline: float | None = None
        self._limit: float | None = None  # the seconds of the time limit the deadline comes from
        self._waits = True  # False after never_wait(): no lock is waited for
        self._cache_pages: int | None = None  # the connection's `cache_size`, read by the first walk part

    def close(self) -> None:
        self.db.close()

    def _check_file(self) -> None:
        """Raise Unavailable when the store's file is gone or replaced under this connection.

        SQLite keeps writing to the unlinked file (then loses it at close): a write must never be
        acknowledged into a file nobody will see again.
        """
        if _file_id(self.path) != self._file:
            raise Unavailable(
                f"the store file {self.path} was removed or replaced while it was open; nothing more is "
                "accepted (restore the file or restart with the right store)"
            )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction of this store (see `sqlitefile.immediate`), held by this thread meanwhile."""
        with self.lock:
            self._check_file()
            writer = _writer(self.identity)
            if not self._waits:
                # Never ahead of a thread already waiting for the lock: it would wait for ever.
                if writer.waiting or not writer.acquire(False):
                    raise WouldWait("another write of this process holds the store")
            elif not writer.acquire_waiting(BUSY_TIMEOUT_MS / 1000):
                raise sqlite3.OperationalError("database is locked")
            try:
                with immediate(self.db, busy=None if self._waits else WouldWait) as db:
                    yield db
            except sqlite3.OperationalError as exc:
                raise self._write_failure(exc) from exc
            finally:
                writer.release()

    def _write_failure(self, exc: sqlite3.OperationalError) -> Exception:
        text = str(exc)
        if "interrupted" in text and self._limit is not None:
            return deadline(self._limit)  # raised here, so a caller can say what was rolled back
        if "readonly" in text:
            return LocalStateError(
                f"store {self.path} is read-only (a read-only mount or file): it can be read, not written"
            )
        if "disk is full" in text or "disk I/O" in text:
            return LocalStateError(
                f"the disk holding store {self.path} is full (or failing); nothing was written, every file is intact: "
                "free some space and retry"
            )
        return exc

    def never_wait(self) -> bool:
        """No wait for a lock on this connection: a read under WAL waits for nothing else, so it answers at
        once or fails with `database is locked`; a write whose lock is held is not begun (`WouldWait`).
        See docs/server.md, "Work on the event loop"."""
        self.db.execute("PRAGMA busy_timeout = 0")
        # Its commits never copy the log back (a page copy and two fsyncs, on an event loop): `checkpoint`
        # does, in a thread that may wait (EnginePool).
        self.db.execute("PRAGMA wal_autocheckpoint = 0")
        self._waits = False
        return True

    def checkpoint(self) -> None:
        """A passive checkpoint: copy the write-ahead log back into the store as far as no reader needs it,
        then the rest with this process's writes held off for that moment.

        A checkpoint that writes keep overtaking never copies the whole log, and a log never copied
        whole is never started over: it grows without end (hundreds of MB in a minute of `mnemo serve`
        under load), and every read looks through more of it. So the bulk is copied while writes go
        on, and what they added meanwhile (a few writes' pages) is copied with the in-process write
        lock held (counted among the waiting, so the event loop's writes wait for that
        moment); the next write then starts the log over. It never waits for a reader: one that still
        needs part of the log leaves that part to the next checkpoint.
        """
        with self.reading() as db:
            # Its count of the log is the log when it began: writes may have added to it since.
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        writer = _writer(self.identity)
        if not writer.acquire_waiting(BUSY_TIMEOUT_MS / 1000):
            return  # writes kept the lock all this while: the next checkpoint tries again
        try:
            with self.reading() as db:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            writer.release()

    def briefly(self) -> AbstractContextManager[None]:
        """A block in which a statement is stopped (`sqlite3.OperationalError: interrupted`) once the block's
        statements have run `BRIEF_STEPS` steps of SQLite's machine (to within `BRIEF_TICK`): a count, not
        a clock, so a thread that waits for the interpreter meanwhile does not cut a short read."""
        return self._brief

    @contextmanager
    def time_limit(self, seconds: float | None) -> Iterator[None]:
        """Stop any statement run inside the block once `seconds` have passed (`Timeout`); None: no limit.

        SQLite calls the progress handler every few thousand steps of a statement, so even a
        statement that returns nothing for a long time is stopped on time.
        """
        if seconds is None:
            yield
            return
        previous, previous_limit = self._deadline, self._limit
        self._deadline, self._limit = time.monotonic() + seconds, seconds
        self.db.set_progress_handler(lambda: int(time.monotonic() > (self._deadline or float("inf"))), 5_000)
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "interrupted" not in str(exc):
                raise
            raise deadline(seconds) from None
        finally:
            self._deadline, self._limit = previous, previous_limit
            if previous is None:
                self.db.set_progress_handler(None, 0)

    def reading(self) -> Reading:
        """The connection for reads (one statement is one snapshot), held by this thread meanwhile."""
        return self._reading

    def fetch_all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Every row of one read statement (one snapshot), read as `with reading() as db:` reads: a page's
        rows, without entering and leaving a `Reading` (a page is read this way on every walk)."""
        with self.lock:
            return self.db.execute(sql, params).fetchall()

    # -- the search index (FTS5, engine/fts.py) ------------------------------------------------

    def index_mark(self, db: sqlite3.Connection) -> int:
        """Where the search index stands before a write transaction inserts (see `index_since`)."""
        return int(db.execute("SELECT coalesce(max(seq), 0) FROM atoms").fetchone()[0])

    def index_since(self, db: sqlite3.Connection, mark: int) -> None:
        """Index every entry the transaction inserted after `mark` (one pass for a bulk insert)."""
        fts.add_since(db, mark, self.language)

    def unindex(self, db: sqlite3.Connection, rows: list[tuple[int, int, str, str]]) -> None:
        """Drop deleted entries, given as (seq, bucket, content, concepts), from the search index."""
        fts.remove(db, rows, self.language)

    def index_columns(self, bucket: int, content: str, concepts: tuple[str, ...] = ()) -> tuple[str, ...]:
        """None: SQLite's search index is a table of its own (`Dialect.atom_columns` is empty)."""
        return ()

    def reindex_search(self, language: str) -> int:
        """Make `language` the store's search language and index every entry again in it (bounded batches,
        resumable: see `schema.reindex`); returns how many entries were indexed.

        Raises:
            ValidationError: a language Snowball has no stemmer for.
        """
        from mnemo_tui.engine.sqlite import schema

        fts.stemmer(language)  # refuses an unknown language before anything changes
        with self.lock:
            with self.transaction() as db:
                schema.rebuild_search(db, language)
            self.language = language
            return schema.reindex(self.db)

    def bounded_rows(
        self, sql: str, params: tuple[Any, ...], count: int, max_bytes: int, wire: int, spliced: bool, order: str
    ) -> tuple[list[Any], bool]:
        """The first rows of a statement ending in `LIMIT ?` (given `count + 1` here): at most `count`, and
        while the items they make total at most `max_bytes` of UTF-8 (`item_bytes`; the first row is kept
        whatever its size), and whether more rows follow.

        Column `wire` is the wire text, followed by `superseded_by` when `spliced`; `order` is the
        statement's order by its column names (PostgreSQL's bound reads it). SQLite steps the statement a
        few rows at a time, so no more than that is read past the bound (trimming a whole page after reading
        it held the whole page).
        """
        text = itemgetter(wire)
        with self.lock:
            cur = self.db.execute(sql, (*params, count + 1))
            try:
                rows: list[Any] = []
                size = 0
                while chunk := cur.fetchmany(BOUNDED_STEP):
                    # A chunk is measured in one pass of C (the walk's hot path); only the chunk the bound
                    # falls in is walked row by row.
                    if spliced:
                        whole = sum(item_bytes(row[wire], row[wire + 1]) for row in chunk)
                    else:
                        texts = list(map(text, chunk))
                        ascii_only = all(map(str.isascii, texts))  # then a text's length is its bytes'
                        whole = sum(map(len, texts if ascii_only else map(str.encode, texts))) + len(texts)
                    if size + whole <= max_bytes and len(rows) + len(chunk) <= count:
                        rows += chunk
                        size += whole
                        continue
                    for row in chunk:
                        size += item_bytes(row[wire], row[wire + 1] if spliced else None)
                        if len(rows) == count or (size > max_bytes and rows):
                            return rows, True
                        rows.append(row)
                return rows, False
            finally:
                cur.close()

    def joined_pages(
        self, plan: FeedPlan, params: tuple[Any, ...], after: FeedPlan, limit: int, pages: int, max_bytes: int
    ) -> tuple[list[Joined], bool]:
        """`FeedOps.joined_pages` with each page's text joined by SQLite (`_page_text`, statements in `walk_sql.py`): one row a page, not
        three objects a row (the rows were most of a streamed walk's cost, issue 64), in one read transaction.

        A whole page's last row is found by its time (`_last_at`), which also says whether more follow. A page
        whose last time two rows share, or whose text passes the bound (SQLite stops joining at it, so no more
        is held than the bound), is read again from its first row as `bounded_rows` reads, rows stepped up to
        the bound, and ends the part.
        """
        read: list[Joined] = []
        sql, at = plan.sql, params
        budget = max_bytes
        with self.lock:
            cached = pages > 1  # a part reads many pages of the file once; a single page needs no larger cache
            if cached:
                if self._cache_pages is None:
                    self._cache_pages = int(self.db.execute("PRAGMA cache_size").fetchone()[0])
                self.db.execute(f"PRAGMA cache_size = {WALK_CACHE}")
            began = not self.db.in_transaction
            if began:
                self.db.execute("BEGIN")
            try:
                for _ in range(pages):
                    page = self._page_text(sql, at, limit, budget, plan.spliced)
                    if page is None:
                        return self._rows_from(read, sql, at, limit, pages, budget, plan.spliced)
                    text, count, last_at = page
                    if count < limit:  # the walk's end: its last page carries no cursor, so no position
                        return ([*read, (text, count, last_at, "")] if count else read), False
                    last = self._last_at(after, last_at)
                    if last is None:
                        return self._rows_from(read, sql, at, limit, pages, budget, plan.spliced)
                    atom, more = last
                    read.append((text, count, last_at, atom))
                    if not more:
                        return read, False
                    budget -= len(text) + 1
                    sql, at = after.sql, (*after.params, last_at, atom)
                return read, True
            finally:
                if began and self.db.in_transaction:
                    self.db.execute("COMMIT")
                if cached:
                    self.db.execute(f"PRAGMA cache_size = {self._cache_pages}")

    def _rows_from(
        self,
        read: list[Joined],
        sql: str,
        params: tuple[Any, ...],
        limit: int,
        pages: int,
        budget: int,
        spliced: bool,
    ) -> tuple[list[Joined], bool]:
        """`read` and the rest of the part from a page's start, its rows stepped up to what is left of the bound."""
        rows, more = self.bounded_rows(sql, params, limit * (pages - len(read)), budget, 2, spliced, FEED_ORDER)
        if read and len(rows) == 1 and item_bytes(*rows[0][2:]) > budget:
            return read, True  # an entry larger than what is left: the next part's first
        return read + joined(rows, limit, spliced), more

    def _page_text(
        self, sql: str, params: tuple[Any, ...], limit: int, budget: int, spliced: bool
    ) -> tuple[bytes, int, int] | None:
        """One page of `limit` rows of a feed statement as (its items joined, its rows, its last row's created_at,
        the least: the order is by time first); None when its items pass `budget` bytes.

        SQLite's string limit is the budget meanwhile: `group_concat` stops (`string or blob too big`) rather
        than grow past it."""
        previous = self.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, budget))
        try:
            text, count, last_at = self.db.execute(page_sql(sql, spliced), (*params, limit)).fetchone()
        except sqlite3.DataError:
            return None
        finally:
            self.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, previous)
        if count == 0:
            return b"", 0, 0
        if len(text) + 1 > budget:
            return None
        return text, count, last_at

    def _last_at(self, after: FeedPlan, at: int) -> tuple[str, bool] | None:
        """The atom_id of the one row of the read at time `at` (the last of a page whose last row is at that
        time) and whether rows follow it; None when two rows of the read share that time (the page's last is
        then not known from its time).

        The read from just past `at` (its first two rows at or before it): one seek of the feed's index."""
        found = self.db.execute(position_sql(after.sql), (*after.params, at + 1, "", 2)).fetchall()
        if not found or found[0][0] != at or (len(found) == 2 and found[1][0] == at):
            return None
        return found[0][1], len(found) == 2

    def stream(self, sql: str, params: list[Any] | tuple[Any, ...], chunk: int) -> Iterator[list[Any]]:
        """Every row of one statement, in chunks of `chunk` rows (the last one shorter): one statement is
        one snapshot."""
        cur = self.db.cursor()
        try:
            cur.execute(sql, params)
            while True:
                rows = cur.fetchmany(chunk)
                if not rows:
                    return
                yield rows
        finally:
            cur.close()
