"""Provides the PostgreSQL schema's upgrade: the numbered steps of engine/postgres/schema.py applied under an
advisory lock, and the search index's resumable rebuild."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from mnemo_tui.engine import fts
from mnemo_tui.engine.postgres import schema
from mnemo_tui.engine.postgres.pools import CONNECT_SECONDS, PgConnection, redacted
from mnemo_tui.engine.postgres.search import vector
from mnemo_tui.errors import LocalStateError

MIGRATION_LOCK = 0x6D6E656D6F  # the advisory lock migrations are applied under ("mnemo")
_MIGRATED: set[str] = set()  # URLs whose schema this process found current (checked once per process)


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
        newer(url, version)
        # An empty database is initialized whole, by whichever server gets each migration's lock first.
        initializing = version == 0

        def admit(found: int, number: int) -> None:
            newer(url, found)
            if number > found and 0 < found < upto and not (allowed or initializing):
                raise LocalStateError(
                    f"the database {redacted(url)} has schema {found} and this mnemo needs {schema.LATEST}: "
                    "back it up, then start one server with `mnemo serve --migrate` (the others wait for it)"
                )

        version = schema.MIGRATIONS.run(
            db, read=_version, record=_record, transaction=lambda: _locked(conn), upto=upto, admit=admit
        )
        if version >= 5:
            reindex(conn)
    return version


def newer(url: str, version: int) -> None:
    """Raises LocalStateError when the database's schema is a newer mnemo's."""
    if version > schema.LATEST:
        raise LocalStateError(
            f"the database {redacted(url)} was written by a newer mnemo (schema {version}, this one "
            f"knows {schema.LATEST}); upgrade mnemo"
        )


@contextmanager
def _locked(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """One transaction holding the migration lock (`pg_advisory_xact_lock`: released at its commit)."""
    with conn.transaction():
        PgConnection(conn).execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
        yield


def _record(db: schema.Executes, number: int) -> None:
    """The schema's version is `mnemo_schema`'s one row, made with the first step."""
    if number == 1:
        db.execute("CREATE TABLE mnemo_schema (version integer NOT NULL)")
        db.execute("INSERT INTO mnemo_schema(version) VALUES (0)")
    db.execute("UPDATE mnemo_schema SET version = ?", (number,))


def _version(db: schema.Executes) -> int:
    # Both tables looked up in one statement (one snapshot): read one at a time, outside the migration lock, a
    # schema another server created between the two reads looked like a foreign database's tables.
    versioned, atoms = db.execute(f"SELECT ({_TABLE}), ({_TABLE})", ("mnemo_schema", "atoms")).fetchone()
    if not versioned:
        if atoms:
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


def reindex(conn: psycopg.Connection[Any], batch: int | None = None) -> int:
    """Make the tsvector of every entry a reindex has not reached yet, `batch` a transaction, then build the
    search index; returns how many entries were indexed.

    Each batch takes the migration lock and records how far it reached in its own transaction, so a
    reindex stopped anywhere goes on from there at the next `--migrate`, and two servers migrating at
    once share the work. Entries written meanwhile carry their tsvector from their own write.
    """
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
