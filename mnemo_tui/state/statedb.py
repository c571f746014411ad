"""Provides the client state database: watermarks and walk checkpoints, keyed by backend, principal, consumer and scope."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from mnemo_tui import timefmt
from mnemo_tui.errors import Conflict, LocalStateError
from mnemo_tui.migrations import Migrations
from mnemo_tui.sqlitefile import create_whole, immediate, long_enough, set_user_version, user_version
from mnemo_tui.values.model import Value, WalkProgress, Watermark

# The state database's schema: numbered steps of the one runner (mnemo_tui/migrations.py), recorded in
# `PRAGMA user_version`.
MIGRATIONS: Migrations[sqlite3.Connection] = Migrations()


@MIGRATIONS.step(1, "watermarks and walk checkpoints")
def m001_watermarks(db: sqlite3.Connection) -> None:
    for statement in (
        """CREATE TABLE IF NOT EXISTS watermarks (
            backend TEXT NOT NULL,
            principal TEXT NOT NULL,
            consumer TEXT NOT NULL,
            scope TEXT NOT NULL,
            created_at INTEGER,
            boundary_ids TEXT NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (backend, principal, consumer, scope)
        ) STRICT""",
        """CREATE TABLE IF NOT EXISTS checkpoints (
            backend TEXT NOT NULL,
            principal TEXT NOT NULL,
            consumer TEXT NOT NULL,
            scope TEXT NOT NULL,
            walk_id TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (backend, principal, consumer, scope)
        ) STRICT""",
    ):
        db.execute(statement)


@MIGRATIONS.step(2, "runs")
def m002_runs(db: sqlite3.Connection) -> None:
    # The catch-up pass running for a key: one at a time, so no pass commits over another's.
    db.execute(
        """CREATE TABLE IF NOT EXISTS runs (
            backend TEXT NOT NULL,
            principal TEXT NOT NULL,
            consumer TEXT NOT NULL,
            scope TEXT NOT NULL,
            run_id TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started_at INTEGER NOT NULL,
            beat_at INTEGER NOT NULL,
            PRIMARY KEY (backend, principal, consumer, scope)
        ) STRICT"""
    )


_VERSION = MIGRATIONS.latest
# A run's record is its lease: every checkpoint renews it. A run of another machine (a state database
# on a shared volume, a container that came back under a new name) is abandoned once its lease is this
# old; one of this machine, once its process is gone, or (a pid reused) once its lease is an hour old.
_FOREIGN_LEASE_US = 5 * 60 * 1_000_000
_LOCAL_LEASE_US = 3600 * 1_000_000


def _not_damage(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc)
    return any(word in text for word in ("locked", "busy", "disk is full", "readonly"))


def _scope_of(key: str) -> str | None:
    return key or None


def _open(path: str | Path) -> sqlite3.Connection:
    """Connect, apply the schema if the file has none yet, and prove both tables are readable."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        db.execute("PRAGMA busy_timeout = 30000")
        db.execute("PRAGMA journal_mode = WAL")
        version = user_version(db)
        if version > _VERSION:
            raise LocalStateError(
                f"state database {path} was written by a newer mnemo (version {version}); upgrade mnemo"
            )
        MIGRATIONS.run(db, read=user_version, record=set_user_version, transaction=lambda: immediate(db))
        # Reading both tables proves the file is what it claims to be.
        db.execute("SELECT count(*) FROM watermarks").fetchone()
        db.execute("SELECT count(*) FROM checkpoints").fetchone()
    except BaseException:
        db.close()
        raise
    return db


class Reader(Protocol):
    """What a state key needs of a backend: its identity and its principal."""

    @property
    def identity(self) -> str: ...

    @property
    def principal(self) -> str: ...


class StateKey(Value):
    """What a watermark and a checkpoint belong to: one consumer's scope, on one backend, as one principal."""

    backend: str
    principal: str
    consumer: str
    scope: str | None

    @staticmethod
    def of(reader: Reader, consumer: str, scope: str | None) -> StateKey:
        """The key of a consumer's scope on a backend (as the backend's principal)."""
        return StateKey(reader.identity, reader.principal, consumer, scope)

    def row(self) -> tuple[str, str, str, str]:
        """The key's four columns (the own store is stored as the empty string: no scope can be empty)."""
        return (self.backend, self.principal, self.consumer, self.scope or "")


_WHERE = "backend = ? AND principal = ? AND consumer = ? AND scope = ?"


# The position a pass started from (`created_at`, boundary ids), None when it had none: what a commit to a
# server's consumer compares (docs/consumers.md).
Base = tuple[int | None, tuple[str, ...]] | None


class Checkpoint(Value):
    """An interrupted walk's progress, saved after each page's output was flushed (`base`: where it started)."""

    walk_id: str
    since: int | None
    skip: tuple[str, ...]
    progress: WalkProgress
    base: Base = None

    def to_json(self) -> str:
        p = self.progress
        return json.dumps(
            {
                "walk_id": self.walk_id,
                "since": self.since,
                "cursor": p.cursor,
                "done": p.done,
                "newest": p.newest,
                "newest_ids": list(p.newest_ids),
                "skip": list(self.skip),
                "pages": p.pages,
                "delivered": p.delivered,
                "repeats_skipped": p.repeats,
                "base": None if self.base is None else [self.base[0], list(self.base[1])],
            }
        )

    @staticmethod
    def from_json(text: str) -> Checkpoint:
        d = json.loads(text)
        progress = WalkProgress(
            cursor=d["cursor"],
            done=d["done"],
            newest=d["newest"],
            newest_ids=tuple(d["newest_ids"]),
            pages=d["pages"],
            delivered=d["delivered"],
            repeats=d["repeats_skipped"],
        )
        base = d.get("base")
        return Checkpoint(
            walk_id=d["walk_id"],
            since=d["since"],
            skip=tuple(d["skip"]),
            progress=progress,
            base=None if base is None else (base[0], tuple(base[1])),
        )


class StateDB:
    """The state database file; every change is one transaction."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            if not self.path.exists():
                create_whole(self.path, lambda tmp: _open(tmp).close())
            elif not long_enough(self.path):
                # mnemo never leaves a file shorter than a page (see create_whole): this one was truncated.
                # SQLite would take it for a new, empty database and silently start over with no watermarks.
                raise sqlite3.DatabaseError("shorter than one SQLite page: the file was truncated")
            self.db = _open(self.path)
        except OSError as exc:
            # No file to blame: the folder is missing or not writable.
            raise LocalStateError(
                f"state database {self.path} cannot be opened ({exc.strerror or exc}); check that its folder "
                "exists and is writable, or point MNEMO_STATE elsewhere"
            ) from None
        except sqlite3.DatabaseError as exc:
            if _not_damage(exc):
                raise self._guard(exc) from None
            raise LocalStateError(
                f"state database {self.path} is unreadable ({exc}). Your watermarks are in it: move it aside "
                "(the next pass then re-reads every scope from the start) or point MNEMO_STATE at a good copy"
            ) from None

    def close(self) -> None:
        self.db.close()

    def _guard(self, exc: sqlite3.DatabaseError) -> LocalStateError:
        """A failure of the state database, said as what it is: locked, full and read-only are not damage."""
        text = str(exc)
        if "locked" in text or "busy" in text:
            return LocalStateError(
                f"state database {self.path} is locked by another process (waited 30 s); nothing was changed: "
                "retry when that process has finished"
            )
        if "disk is full" in text:
            return LocalStateError(
                f"the disk holding state database {self.path} is full; nothing was changed and every file is intact: "
                "free some space and retry"
            )
        if "readonly" in text:
            return LocalStateError(
                f"state database {self.path} is read-only; point MNEMO_STATE at a file this user may write"
            )
        return LocalStateError(f"state database {self.path} failed ({exc}); move it aside or fix MNEMO_STATE")

    def _execute(self, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor:
        """One statement (a statement is atomic); a database failure becomes a LocalStateError."""
        try:
            return self.db.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise self._guard(exc) from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (`sqlitefile.immediate`); a database failure becomes a LocalStateError."""
        try:
            with immediate(self.db) as db:
                yield db
        except sqlite3.DatabaseError as exc:
            raise self._guard(exc) from None

    # -- watermarks -----------------------------------------------------------------------

    def load(self, key: StateKey) -> Watermark | None:
        """The watermark of one consumer for one scope, or None if it has none."""
        row = self._execute(
            f"SELECT created_at, boundary_ids, updated_at FROM watermarks WHERE {_WHERE}", key.row()
        ).fetchone()
        if row is None:
            return None
        return Watermark(
            scope=key.scope, consumer=key.consumer, created_at=row[0], boundary_ids=self._ids(row[1]), updated_at=row[2]
        )

    def _ids(self, text: str) -> tuple[str, ...]:
        try:
            ids = json.loads(text)
        except ValueError:
            ids = None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise LocalStateError(
                f"state database {self.path} holds a damaged watermark; move it aside (the next pass then "
                "re-reads every scope from the start) or reset that watermark with `mnemo watermark reset`"
            )
        return tuple(ids)

    def list(self, backend: str, principal: str) -> list[Watermark]:
        """Every watermark of this backend and principal."""
        rows = self._execute(
            "SELECT consumer, scope, created_at, boundary_ids, updated_at FROM watermarks "
            "WHERE backend = ? AND principal = ? ORDER BY consumer, scope",
            (backend, principal),
        ).fetchall()
        return [
            Watermark(
                scope=_scope_of(r[1]),
                consumer=r[0],
                created_at=r[2],
                boundary_ids=self._ids(r[3]),
                updated_at=r[4],
            )
            for r in rows
        ]

    def commit(
        self,
        key: StateKey,
        created_at: int | None,
        boundary_ids: tuple[str, ...],
        *,
        force: bool = False,
        expected: Base = None,
    ) -> Watermark:
        """Store a watermark and drop the walk's checkpoint, in one transaction.

        A watermark only moves forward: a commit older than the stored one keeps the stored one, and
        one at the same instant adds its ids to the stored ones. `force` (`watermark set`) moves it
        anywhere. `expected` (where the pass started) is not compared here: one pass of a key runs at a
        time (`claim_run`); a server's consumers compare it (backends/remote_consumers.py).
        """
        now = timefmt.now_us()
        with self._transaction() as db:
            row = db.execute(f"SELECT created_at, boundary_ids FROM watermarks WHERE {_WHERE}", key.row()).fetchone()
            if not force and row is not None and row[0] is not None and created_at is not None:
                if created_at < row[0]:
                    db.execute(f"DELETE FROM checkpoints WHERE {_WHERE}", key.row())
                    created_at, boundary_ids = row[0], self._ids(row[1])
                elif created_at == row[0]:
                    boundary_ids = tuple(dict.fromkeys((*self._ids(row[1]), *boundary_ids)))
            db.execute(
                "INSERT INTO watermarks(backend, principal, consumer, scope, created_at, boundary_ids, updated_at) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT (backend, principal, consumer, scope) DO UPDATE SET "
                "created_at = excluded.created_at, boundary_ids = excluded.boundary_ids, updated_at = excluded.updated_at",
                (*key.row(), created_at, json.dumps(list(boundary_ids)), now),
            )
            db.execute(f"DELETE FROM checkpoints WHERE {_WHERE}", key.row())
        return Watermark(
            scope=key.scope, consumer=key.consumer, created_at=created_at, boundary_ids=boundary_ids, updated_at=now
        )

    def reset(self, key: StateKey) -> bool:
        """Forget a watermark (and any checkpoint); returns whether one existed."""
        with self._transaction() as db:
            cur = db.execute(f"DELETE FROM watermarks WHERE {_WHERE}", key.row())
            db.execute(f"DELETE FROM checkpoints WHERE {_WHERE}", key.row())
            db.execute(f"DELETE FROM runs WHERE {_WHERE}", key.row())
        return cur.rowcount > 0

    # -- runs -------------------------------------------------------------------------------

    def claim_run(self, key: StateKey, run_id: str) -> None:
        """Record that a catch-up pass of this key runs now; one at a time.

        A run whose process is gone (killed, crashed) leaves its record behind: it is taken over.

        Raises:
            Conflict: another pass of the same consumer and scope is running (`watermark reset` clears a
                record that should not be there).
        """
        host, pid, now = socket.gethostname(), os.getpid(), timefmt.now_us()
        with self._transaction() as db:
            row = db.execute(f"SELECT host, pid, started_at, beat_at FROM runs WHERE {_WHERE}", key.row()).fetchone()
            if row is not None and _alive(row[0], row[1], row[3], host, now):
                where = "" if row[0] == host else f" on {row[0]}"
                raise Conflict(
                    f"another catchup of consumer {key.consumer!r} on {key.scope or 'your own store'} is running "
                    f"(pid {row[1]}{where}, since {timefmt.to_iso(row[2])}); wait for it to finish, or use another "
                    "--consumer"
                )
            db.execute(
                "INSERT OR REPLACE INTO runs(backend, principal, consumer, scope, run_id, host, pid, started_at, beat_at) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (*key.row(), run_id, host, pid, now, now),
            )

    def release_run(self, key: StateKey, run_id: str) -> None:
        """Forget this run's record (only its own)."""
        self._execute(f"DELETE FROM runs WHERE {_WHERE} AND run_id = ?", (*key.row(), run_id))

    # -- checkpoints ----------------------------------------------------------------------

    def carry(self, old: str, new: str) -> int:
        """Give backend `new` every watermark and checkpoint of backend `old` (a store moved into a database):
        the consumers go on, and `--resume` continues, where they were. Returns how many rows were carried."""
        carried = 0
        with self._transaction() as db:
            for table, columns in (
                ("watermarks", "principal, consumer, scope, created_at, boundary_ids, updated_at"),
                ("checkpoints", "principal, consumer, scope, walk_id, state, updated_at"),
            ):
                carried += db.execute(
                    f"INSERT OR IGNORE INTO {table}(backend, {columns}) SELECT ?, {columns} FROM {table} WHERE backend = ?",
                    (new, old),
                ).rowcount
        return carried

    def save_checkpoint(self, key: StateKey, cp: Checkpoint) -> None:
        """Save a walk's progress (one statement, so atomic)."""
        self._execute(
            "INSERT INTO checkpoints(backend, principal, consumer, scope, walk_id, state, updated_at) "
            "VALUES (?,?,?,?,?,?,?) ON CONFLICT (backend, principal, consumer, scope) DO UPDATE SET "
            "walk_id = excluded.walk_id, state = excluded.state, updated_at = excluded.updated_at",
            (*key.row(), cp.walk_id, cp.to_json(), timefmt.now_us()),
        )
        # The run's lease renewed with its progress (its walk id is its run id).
        self._execute(
            f"UPDATE runs SET beat_at = ? WHERE {_WHERE} AND run_id = ?", (timefmt.now_us(), *key.row(), cp.walk_id)
        )

    def load_checkpoint(self, key: StateKey) -> Checkpoint | None:
        row = self._execute(f"SELECT state FROM checkpoints WHERE {_WHERE}", key.row()).fetchone()
        if row is None:
            return None
        try:
            return Checkpoint.from_json(row[0])
        except (ValueError, KeyError, TypeError):
            raise LocalStateError(
                f"state database {self.path} holds a damaged walk checkpoint; run catchup without --resume "
                "(it re-reads from the watermark)"
            ) from None

    def drop_checkpoint(self, key: StateKey) -> None:
        self._execute(f"DELETE FROM checkpoints WHERE {_WHERE}", key.row())


def _alive(host: str, pid: int, beat_at: int, here: str, now: int) -> bool:
    """Whether a recorded run may still be running: its lease is fresh, and on this machine its process exists."""
    if host != here:
        return now - beat_at < _FOREIGN_LEASE_US
    if now - beat_at >= _LOCAL_LEASE_US:
        return False

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def watermark_wire(w: Watermark | None) -> dict[str, object] | None:
    """The watermark object of docs/cli.md."""
    if w is None:
        return None
    return {
        "scope": w.scope,
        "consumer": w.consumer,
        "created_at": None if w.created_at is None else timefmt.to_iso(w.created_at),
        "boundary_ids": list(w.boundary_ids),
        "updated_at": timefmt.to_iso(w.updated_at),
    }
