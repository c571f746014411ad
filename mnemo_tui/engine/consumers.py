"""Provides durable consumers: each principal's named readers' positions per scope, kept by the store (docs/consumers.md).

The statements are the same on SQLite and PostgreSQL (`?` parameters, mapped for psycopg by `engine/dialect.py`).
A commit is a compare-and-set done by one statement, an `UPDATE ... WHERE` the expected position or an
`INSERT ... ON CONFLICT DO NOTHING` when none was expected: atomic on both engines, whatever the number of
servers (PostgreSQL re-checks an `UPDATE`'s condition on the row it locked).
"""

from __future__ import annotations

import json

from mnemo_tui import timefmt
from mnemo_tui.engine.base import Database
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.limits import parse_scope, room_of
from mnemo_tui.values.model import Value

MAX_CONSUMER = 200  # characters of a consumer's name, as the CLI's `--consumer`
MAX_HOST = 255
MAX_BOUNDARY = 20_000  # ids one position may hold (the overlap window of a burst of writes; 800 KB of a 1 MiB body)
_COLUMNS = "consumer, scope, created_at, boundary_ids, updated_at, host"
_WHERE = "principal = ? AND consumer = ? AND scope = ?"


class Position(Value):
    """A consumer's position on one scope: the watermark (`created_at` and its boundary ids), when it was last
    moved and by which host (what the client said; `""` when it said nothing)."""

    consumer: str
    scope: str | None
    created_at: int | None
    boundary_ids: tuple[str, ...]
    updated_at: int
    host: str = ""


class Lag(Value):
    """How far a position is behind its scope: the entries newer than it and the seconds between it and the
    newest of them (0 and 0.0 when it is caught up); None and None when the scope cannot be read any more."""

    entries: int | None
    seconds: float | None


def check_consumer(name: str) -> str:
    """A consumer's name as a store keeps it (1 to 200 characters, no control character).

    Raises:
        ValidationError: a blank, over-long or unprintable name.
    """
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_CONSUMER:
        raise ValidationError(f"a consumer's name is 1 to {MAX_CONSUMER} characters, not blank")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise ValidationError("a consumer's name holds no control character")
    return name


def _ids_text(boundary_ids: tuple[str, ...]) -> str:
    """The stored form of boundary ids: sorted, so the compare-and-set compares text with text."""
    return json.dumps(sorted(boundary_ids))


def _position(row: tuple[object, ...]) -> Position:
    created = row[2]
    return Position(
        consumer=str(row[0]),
        scope=str(row[1]) or None,
        created_at=None if created is None else int(str(created)),
        boundary_ids=tuple(json.loads(str(row[3]))),
        updated_at=int(str(row[4])),
        host=str(row[5]),
    )


class ConsumerOps(Database):
    """Positions by (principal, consumer, scope); the own store is kept as the empty scope (no domain is empty)."""

    def consumers(self, principal: str, consumer: str | None = None) -> list[Position]:
        """Every position of the principal (of one consumer when named), by consumer then scope."""
        where, params = (
            ("principal = ?", (principal,))
            if consumer is None
            else ("principal = ? AND consumer = ?", (principal, consumer))
        )
        with self.reading() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM consumers WHERE {where} ORDER BY consumer, scope", params
            ).fetchall()
        return [_position(r) for r in rows]

    def consumer_position(self, principal: str, consumer: str, scope: str | None) -> Position | None:
        """One consumer's position on one scope, or None when it has none."""
        with self.reading() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM consumers WHERE {_WHERE}", (principal, consumer, scope or "")
            ).fetchone()
        return None if row is None else _position(row)

    def consumer_commit(
        self,
        principal: str,
        consumer: str,
        scope: str | None,
        created_at: int | None,
        boundary_ids: tuple[str, ...],
        *,
        expected: tuple[int | None, tuple[str, ...]] | None,
        unconditional: bool = False,
        host: str = "",
    ) -> tuple[bool, Position | None]:
        """Move a consumer's position to `(created_at, boundary_ids)` if it is at `expected` (None: it has no
        position yet), or whatever it is with `unconditional` (`watermark set`). Returns whether it moved and
        the position stored after the call (the other pass's, when it did not move).

        Raises:
            ValidationError: a bad name, scope, host, or too many boundary ids.
        """
        check_consumer(consumer)
        parse_scope(scope)
        if len(host) > MAX_HOST or len(boundary_ids) > MAX_BOUNDARY:
            raise ValidationError(f"host is at most {MAX_HOST} characters, boundary_ids at most {MAX_BOUNDARY} ids")
        key = (principal, consumer, scope or "")
        now, ids = timefmt.now_us(), _ids_text(boundary_ids)
        with self.transaction() as db:
            if unconditional:
                db.execute(
                    f"INSERT INTO consumers(principal, {_COLUMNS}) VALUES (?,?,?,?,?,?,?) "
                    "ON CONFLICT (principal, consumer, scope) DO UPDATE SET created_at = excluded.created_at, "
                    "boundary_ids = excluded.boundary_ids, updated_at = excluded.updated_at, host = excluded.host",
                    (*key, created_at, ids, now, host),
                )
                moved = True
            elif expected is None:
                moved = (
                    db.execute(
                        f"INSERT INTO consumers(principal, {_COLUMNS}) VALUES (?,?,?,?,?,?,?) "
                        "ON CONFLICT (principal, consumer, scope) DO NOTHING",
                        (*key, created_at, ids, now, host),
                    ).rowcount
                    == 1
                )
            else:
                at, held = expected
                mark = "created_at IS NULL" if at is None else "created_at = ?"
                moved = (
                    db.execute(
                        "UPDATE consumers SET created_at = ?, boundary_ids = ?, updated_at = ?, host = ? "
                        f"WHERE {_WHERE} AND {mark} AND boundary_ids = ?",
                        (created_at, ids, now, host, *key, *(() if at is None else (at,)), _ids_text(held)),
                    ).rowcount
                    == 1
                )
            row = db.execute(f"SELECT {_COLUMNS} FROM consumers WHERE {_WHERE}", key).fetchone()
        return moved, None if row is None else _position(row)

    def consumer_delete(self, principal: str, consumer: str, scope: str | None, *, every_scope: bool = False) -> int:
        """Forget a consumer's position on one scope (or on every scope); returns how many were forgotten."""
        with self.transaction() as db:
            if every_scope:
                cur = db.execute("DELETE FROM consumers WHERE principal = ? AND consumer = ?", (principal, consumer))
            else:
                cur = db.execute(f"DELETE FROM consumers WHERE {_WHERE}", (principal, consumer, scope or ""))
        return int(cur.rowcount)

    def consumer_lag(self, principal: str, position: Position) -> Lag:
        """How far `position` is behind its scope, as the principal reads it now (superseded revisions not
        counted on the own store; a room's members see every entry). A room the principal left reads None."""
        room_id = room_of(position.scope)
        after = -1 if position.created_at is None else position.created_at
        with self.reading() as db:
            try:
                bucket = self.own_bucket(principal) if room_id is None else self.room_bucket(principal, room_id)
            except Forbidden:
                return Lag(entries=None, seconds=None)
            if bucket is None:
                return Lag(entries=0, seconds=0.0)
            sql = "SELECT count(*), max(created_at) FROM atoms WHERE bucket = ? AND created_at > ?"
            params: tuple[object, ...] = (bucket, after)
            if room_id is None:
                sql += " AND superseded_by IS NULL"
                if position.scope is not None:
                    sql, params = sql + " AND domain = ?", (*params, position.scope)
            row = db.execute(sql, params).fetchone()
        count, newest = int(row[0]), row[1]
        if not count or newest is None or position.created_at is None:
            return Lag(entries=count, seconds=0.0 if not count else None)
        return Lag(entries=count, seconds=round((int(newest) - position.created_at) / 1e6, 6))
