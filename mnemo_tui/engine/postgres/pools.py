"""Provides the PostgreSQL engine's connections: one pool per database URL, a connection spoken to as the shared
statements expect, and the mnemo error each driver failure means (the password never shown)."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

import psycopg
import psycopg.errors
from psycopg import conninfo as pg_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from mnemo_tui.dburl import database_identity
from mnemo_tui.engine.base import deadline
from mnemo_tui.engine.dialect import POSTGRES
from mnemo_tui.engine.rules import refuse_nul
from mnemo_tui.errors import Conflict, MnemoError, Unavailable, ValidationError

DEFAULT_POOL = 8
CONNECT_SECONDS = 5.0  # to get a connection from the pool (the database down: 503 after this)
PREPARE_AFTER = 5  # psycopg's own threshold: a statement run this often on a connection is prepared


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
        return self.conn.execute(POSTGRES.sql(sql), _params(params))

    def executemany(self, sql: str, rows: Any) -> None:
        rows = [_params(r) for r in rows]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(POSTGRES.sql(sql), rows)


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
