"""Provides the embedded store's connection: the file, its transactions, its buckets and the engine's clock."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mnemo_tui.engine.schema import LATEST, migrate
from mnemo_tui.errors import Forbidden, LocalStateError
from mnemo_tui.model import room_of
from mnemo_tui.sqlitefile import create_whole, immediate, long_enough

BUSY_TIMEOUT_MS = 30_000
NOT_A_MEMBER = "you are not a member of this room (or it does not exist)"


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating with mode 0600 if needed) and migrate a store file.

    Raises:
        LocalStateError: when the file exists but is not a readable mnemo store.
    """
    path = Path(path)
    try:
        if not path.exists():
            create_whole(path, lambda tmp: _open(tmp)[0].close())
        elif not long_enough(path):
            # mnemo never leaves a store file shorter than a page (see create_whole): this one was truncated,
            # and SQLite would silently take it for a new, empty store.
            raise sqlite3.DatabaseError("shorter than one SQLite page: the file was truncated")
        db, version = _open(path)
    except sqlite3.DatabaseError as exc:
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


def _open(path: Path) -> tuple[sqlite3.Connection, int]:
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


class Database:
    """One store file and one connection to it; the base every part of the embedded engine builds on.

    Attributes:
        path: the resolved store file.
        identity: what watermarks of this store are keyed by (the path).
        db: the connection (autocommit: transactions are explicit, see `transaction`).
        secret: the store's cursor secret.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).resolve()
        self.identity = str(self.path)
        self.db = connect(self.path)
        self.secret = bytes(self.db.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()[0])
        self.lock = threading.RLock()

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction of this store (see `sqlitefile.immediate`), held by this thread meanwhile."""
        with self.lock, immediate(self.db) as db:
            yield db

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads (one statement is one snapshot), held by this thread meanwhile."""
        with self.lock:
            yield self.db

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
        row = self.db.execute(
            "SELECT r.bucket, m.scope FROM members m JOIN rooms r ON r.room_id = m.room_id "
            "WHERE m.room_id = ? AND m.principal = ?",
            (room_id, principal),
        ).fetchone()
        if row is None:
            raise Forbidden(NOT_A_MEMBER)
        if row[1] != "read_write":
            raise Forbidden("your membership of this room is read-only")
        return int(row[0])

    def require_member(self, principal: str, room_id: str) -> None:
        """Raises Forbidden unless the principal is a member of the room (an unknown room answers the same)."""
        row = self.db.execute(
            "SELECT 1 FROM members WHERE room_id = ? AND principal = ?", (room_id, principal)
        ).fetchone()
        if row is None:
            raise Forbidden(NOT_A_MEMBER)


class Clock:
    """The engine's clock, inside one write transaction: `created_at` strictly increasing per bucket.

    Each bucket's last instant is read once, advanced in memory and written back by `save`, so a
    write of one entry and a bulk insert of a million keep the same promise: no entry is ever
    committed behind a reader's cursor or watermark, whatever the writers' clocks say (SQLite's
    write lock serialises the transactions that hold a `Clock`).
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.last: dict[int, int] = {}

    def next(self, bucket: int, wanted: int) -> int:
        """The instant for a new entry of `bucket`: `max(wanted, last + 1)`."""
        last = self.last.get(bucket)
        if last is None:
            last = int(self.db.execute("SELECT last_created_at FROM buckets WHERE bucket = ?", (bucket,)).fetchone()[0])
        created = max(wanted, last + 1)
        self.last[bucket] = created
        return created

    def save(self) -> None:
        """Write every advanced bucket's last instant back (before the transaction commits)."""
        self.db.executemany(
            "UPDATE buckets SET last_created_at = ? WHERE bucket = ?", [(t, b) for b, t in self.last.items()]
        )
