"""Provides the embedded store's connection: the file, its transactions, its buckets and the engine's clock."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from threading import RLock
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine import fts
from mnemo_tui.engine.sqlite.schema import LATEST, migrate
from mnemo_tui.errors import Forbidden, LocalStateError, Timeout, Unavailable, ValidationError, WouldWait
from mnemo_tui.limits import dumps, room_of
from mnemo_tui.sqlitefile import create_whole, immediate, long_enough

if TYPE_CHECKING:
    from typing import Any

    from mnemo_tui.files import StrPath

BUSY_TIMEOUT_MS = 30_000
# No entry is stamped after 9000-01-01: a writer whose clock runs wild can push its bucket's clock
# ahead, never to the end of representable time, so `last + 1` always exists and the bucket stays
# writable for everyone (a millennium of microseconds is room for any number of later writes).
LATEST_WRITE = 221_845_392_000_000_000
NOT_A_MEMBER = "you are not a member of this room (or it does not exist)"


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
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
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
    return _WRITERS.setdefault(identity, Writer())


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class Reading:
    """`Database.reading()`: the lock held around the connection (a class, not a generator: every page pays it)."""

    __slots__ = ("_store",)

    def __init__(self, store: Database) -> None:
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
    """`Database.briefly()`, one per connection (a class, not a generator: every read on the event loop pays it)."""

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


def deadline(seconds: float) -> Timeout:
    """The error of a request stopped at its deadline (both engines)."""
    return Timeout(
        f"the request ran past its {seconds:g} s limit and was stopped; ask for less (fewer or rarer words, a smaller top_k)",
        details={"reason": "deadline", "limit_seconds": seconds},
    )


class Database:
    """One store file and one connection to it; the base every part of the embedded engine builds on.

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
        lock held (counted among the waiting, so the event loop's writes go to a thread for that
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

    def check_time(self) -> None:
        """Raise `Timeout` when the block's time limit has passed: what a loop of Python inside a request
        calls between steps (the progress handler stops statements, not Python)."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise deadline(self._limit or 0.0)

    def reading(self) -> Reading:
        """The connection for reads (one statement is one snapshot), held by this thread meanwhile."""
        return self._reading

    def fetch_all(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """Every row of one read statement (one snapshot), read as `with reading() as db:` reads: a page's
        rows, without entering and leaving a `Reading` (a page is read this way on every walk)."""
        with self.lock:
            return self.db.execute(sql, params).fetchall()

    # -- buckets: a principal's own store, or a room --------------------------------------

    # -- what differs between engines: the clock's lock, the search index, one-snapshot streams ----

    def clock(self, db: sqlite3.Connection) -> Clock:
        """The clock of one write transaction (SQLite's write lock already serialises them)."""
        return Clock(db)

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
        """Values of the engine's own extra atom columns (`EXTRA_ATOM_COLUMNS`) for a new entry: none here."""
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

    EXTRA_ATOM_COLUMNS: tuple[str, ...] = ()

    def each_concept(self, alias: str) -> str:
        """A FROM item yielding each concept of atom `a` as `<alias>.value`."""
        return f"json_each(a.concepts) {alias}"

    def one_of(self, column: str, values: list[str]) -> tuple[str, list[Any]]:
        """`column` is one of `values`, as a condition with one parameter however many values there are
        (one variable per value passed SQLite's limit of variables once data made the list long)."""
        return f"{column} IN (SELECT value FROM json_each(?))", [dumps(values)]

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

    # -- buckets: a principal's own store, or a room --------------------------------------

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
    write lock serialises the transactions that hold a `Clock`).
    """

    READ_LAST = "SELECT last_created_at FROM buckets WHERE bucket = ?"

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.last: dict[int, int] = {}

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
            last = int(self.db.execute(self.READ_LAST, (bucket,)).fetchone()[0])
        created = max(wanted, last + 1)
        self.last[bucket] = created
        return created

    def save(self) -> None:
        """Write every advanced bucket's last instant back (before the transaction commits)."""
        self.db.executemany(
            "UPDATE buckets SET last_created_at = ? WHERE bucket = ?", [(t, b) for b, t in self.last.items()]
        )
