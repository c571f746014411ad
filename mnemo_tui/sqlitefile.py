"""Provides SQLite files that are created whole (so a short file can only be a damaged one), and their transactions."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mnemo_tui.files import EXCLUSIVE, discard, make_folder, temporary_name

if TYPE_CHECKING:
    from mnemo_tui.files import StrPath

SMALLEST_PAGE = 512


def long_enough(path: StrPath) -> bool:
    """Whether a file is at least one (smallest) SQLite page long; SQLite itself refuses a longer file of garbage.

    Only `stat`, never `open`: closing any descriptor of a database file drops every POSIX lock this
    process holds on it, which would let another process delete the WAL under our open connections.
    """
    return os.stat(path).st_size >= SMALLEST_PAGE


def create_whole(path: StrPath, build: Callable[[str], None]) -> None:
    """Create a database whole: `build` fills a 0600 temporary file, which is then linked in place.

    The file at `path` thus never exists without its schema, so a file shorter than a page there
    can only be a truncated one (SQLite would silently take it for a new, empty database). `link`
    (unlike `rename`) refuses to replace a file another process created first.
    """
    make_folder(path)
    tmp = temporary_name(path)
    os.close(os.open(tmp, EXCLUSIVE, 0o600))
    try:
        build(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it meanwhile: use theirs
        except OSError:
            if not os.path.exists(path):  # a file system without hard links: rename, the next best thing
                os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
            discard(leftover)


@contextmanager
def immediate(db: sqlite3.Connection, *, busy: type[Exception] | None = None) -> Iterator[sqlite3.Connection]:
    """One write transaction on an autocommit connection: `BEGIN IMMEDIATE` (the write lock first, so what
    the block reads is current), committed when the block ends, rolled back when it raises.

    Python's default deferred transactions read outside the write lock and fail with `SQLITE_BUSY`,
    without waiting, when they upgrade: every write of mnemo's files goes through here instead.
    `busy`: raised instead of SQLite's error when the write lock is held, before anything began.
    """
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if busy is not None and ("locked" in str(exc) or "busy" in str(exc)):
            raise busy(str(exc)) from None
        raise
    try:
        yield db
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def user_version(db: sqlite3.Connection) -> int:
    """The schema version an SQLite file records (`PRAGMA user_version`): the last migration step applied."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def set_user_version(db: sqlite3.Connection, number: int) -> None:
    """Record step `number` as applied (inside the step's transaction)."""
    db.execute(f"PRAGMA user_version = {int(number)}")
