"""Provides the embedded store's schema: numbered steps run by the one runner (mnemo_tui/migrations.py), each in its
own `BEGIN IMMEDIATE` transaction, the version recorded in `PRAGMA user_version`."""

from __future__ import annotations

import sqlite3

from mnemo_tui.engine import fts
from mnemo_tui.migrations import Migrations
from mnemo_tui.sqlitefile import immediate, set_user_version, user_version

MIGRATIONS: Migrations[sqlite3.Connection] = Migrations()
migration = MIGRATIONS.step  # @migration(number, name) registers the next step


@migration(1, "initial")
def m001_initial(db: sqlite3.Connection) -> None:
    import secrets  # only a new store needs it; opening an existing one stays cheap

    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL) STRICT")
    db.execute("INSERT INTO meta(key, value) VALUES ('cursor_secret', ?)", (secrets.token_bytes(32),))
    db.execute("INSERT INTO meta(key, value) VALUES ('store_id', ?)", (secrets.token_hex(8).encode(),))
    # A bucket is one store: a principal's own store or a room. `last_created_at` keeps the
    # engine's clock strictly increasing per bucket, whatever the writers' clocks say.
    db.execute(
        """CREATE TABLE buckets (
            bucket INTEGER PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('own', 'room')),
            owner TEXT NOT NULL,
            last_created_at INTEGER NOT NULL DEFAULT 0,
            UNIQUE (kind, owner)
        ) STRICT"""
    )
    db.execute(
        """CREATE TABLE atoms (
            seq INTEGER PRIMARY KEY,
            atom_id TEXT NOT NULL UNIQUE,
            bucket INTEGER NOT NULL REFERENCES buckets(bucket),
            domain TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            content TEXT NOT NULL,
            concepts TEXT NOT NULL,
            metadata TEXT,
            principal TEXT NOT NULL,
            agent TEXT,
            agent_name TEXT,
            client_env TEXT,
            external_ref TEXT,
            supersedes TEXT,
            superseded_by TEXT,
            wire TEXT NOT NULL
        ) STRICT"""
    )
    # The feed's keyset queries walk these indexes exactly: (bucket[, domain], created_at, atom_id).
    db.execute("CREATE INDEX atoms_feed ON atoms (bucket, created_at, atom_id)")
    db.execute("CREATE INDEX atoms_domain_feed ON atoms (bucket, domain, created_at, atom_id)")
    db.execute("CREATE UNIQUE INDEX atoms_external_ref ON atoms (bucket, external_ref) WHERE external_ref IS NOT NULL")
    db.execute(
        """CREATE TABLE rooms (
            room_id TEXT PRIMARY KEY,
            bucket INTEGER NOT NULL UNIQUE REFERENCES buckets(bucket),
            name TEXT NOT NULL,
            description TEXT,
            owner TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            archived INTEGER NOT NULL DEFAULT 0,
            UNIQUE (owner, name)
        ) STRICT"""
    )
    db.execute(
        """CREATE TABLE members (
            room_id TEXT NOT NULL REFERENCES rooms(room_id),
            principal TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
            scope TEXT NOT NULL CHECK (scope IN ('read', 'read_write')),
            joined_at INTEGER NOT NULL,
            PRIMARY KEY (room_id, principal)
        ) STRICT, WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX members_by_principal ON members (principal, joined_at)")
    db.execute(
        """CREATE TABLE invites (
            invite_id TEXT PRIMARY KEY,
            room_id TEXT NOT NULL REFERENCES rooms(room_id),
            code_hash TEXT NOT NULL UNIQUE,
            scope TEXT NOT NULL CHECK (scope IN ('read', 'read_write')),
            expires_at INTEGER NOT NULL,
            max_uses INTEGER NOT NULL,
            uses INTEGER NOT NULL DEFAULT 0,
            created_by TEXT NOT NULL,
            created_at INTEGER NOT NULL
        ) STRICT"""
    )
    # The vault is its own table: no feed, search or report statement names it.
    db.execute(
        """CREATE TABLE vault (
            atom_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            alias TEXT NOT NULL,
            context TEXT NOT NULL,
            sealed TEXT NOT NULL,
            concepts TEXT NOT NULL DEFAULT '[]',
            created_at INTEGER NOT NULL,
            UNIQUE (principal, alias)
        ) STRICT"""
    )
    db.execute(
        """CREATE TABLE api_keys (
            key_id TEXT PRIMARY KEY,
            principal TEXT NOT NULL,
            key_hash TEXT NOT NULL UNIQUE,
            created_at INTEGER NOT NULL,
            revoked_at INTEGER
        ) STRICT"""
    )


@migration(2, "full-text search")
def m002_search(db: sqlite3.Connection) -> None:
    db.execute("CREATE VIRTUAL TABLE atoms_fts USING fts5(content, content='atoms', content_rowid='seq')")
    db.execute(
        "CREATE TRIGGER atoms_fts_insert AFTER INSERT ON atoms BEGIN "
        "INSERT INTO atoms_fts(rowid, content) VALUES (new.seq, new.content); END"
    )
    db.execute(
        "CREATE TRIGGER atoms_fts_delete AFTER DELETE ON atoms BEGIN "
        "INSERT INTO atoms_fts(atoms_fts, rowid, content) VALUES ('delete', old.seq, old.content); END"
    )


@migration(3, "search index stamped by bucket")
def m003_bucket_search(db: sqlite3.Connection) -> None:
    # A match must never leave the caller's store, not even in how long it takes (see engine/fts.py):
    # the index is rebuilt contentless, each token stamped with its bucket, and kept by the insert
    # and delete paths instead of triggers.
    db.execute("DROP TRIGGER IF EXISTS atoms_fts_insert")
    db.execute("DROP TRIGGER IF EXISTS atoms_fts_delete")
    db.execute("DROP TABLE IF EXISTS atoms_fts")
    db.execute("CREATE VIRTUAL TABLE atoms_fts USING fts5(body, content='')")
    # Its rows were made by the rule of that day (unstemmed content only); migration 7 rebuilds them.


@migration(4, "feedback, fingerprints and idempotency")
def m004_feedback(db: sqlite3.Connection) -> None:
    # One row per reported outcome (POST /memory/feedback); an atom's valence is the mean of its rows.
    db.execute(
        """CREATE TABLE feedback (
            atom_id TEXT NOT NULL,
            bucket INTEGER NOT NULL,
            outcome REAL NOT NULL,
            at INTEGER NOT NULL
        ) STRICT"""
    )
    db.execute("CREATE INDEX feedback_by_atom ON feedback (atom_id)")
    db.execute("CREATE INDEX feedback_by_bucket ON feedback (bucket)")
    # An exact-match handle given at write time (a read with the same fingerprint is an episodic hit).
    db.execute("ALTER TABLE atoms ADD COLUMN fingerprint TEXT")
    db.execute("CREATE INDEX atoms_fingerprint ON atoms (bucket, fingerprint) WHERE fingerprint IS NOT NULL")
    # The answers of requests sent with an `Idempotency-Key`, per principal and operation, for 24 hours.
    db.execute(
        """CREATE TABLE idempotency (
            principal TEXT NOT NULL,
            key TEXT NOT NULL,
            answer TEXT NOT NULL,
            at INTEGER NOT NULL,
            PRIMARY KEY (principal, key)
        ) STRICT, WITHOUT ROWID"""
    )


@migration(5, "superseded_by indexed")
def m005_superseded_by(db: sqlite3.Connection) -> None:
    # A delete clears `superseded_by` where it names the deleted atom: without an index each delete
    # scanned its bucket, and a 10,000-entry domain or room could not be deleted within a request.
    db.execute("CREATE INDEX atoms_superseded_by ON atoms (superseded_by) WHERE superseded_by IS NOT NULL")


@migration(6, "tombstones")
def m006_tombstones(db: sqlite3.Connection) -> None:
    # What every delete path leaves behind, kept for a retention (engine/tombstones.py): read by
    # `catchup --changes` as (bucket, removed_at, atom_id) after a consumer's watermark.
    db.execute(
        """CREATE TABLE tombstones (
            bucket INTEGER NOT NULL,
            atom_id TEXT NOT NULL,
            domain TEXT NOT NULL,
            removed_at INTEGER NOT NULL,
            reason TEXT NOT NULL CHECK (reason IN ('deleted', 'domain_wiped', 'room_deleted', 'reset'))
        ) STRICT"""
    )
    db.execute("CREATE INDEX tombstones_feed ON tombstones (bucket, removed_at, atom_id)")
    # The newest removal of the bucket dropped past the retention: a watermark older has missed removals.
    db.execute("ALTER TABLE buckets ADD COLUMN tombstones_dropped INTEGER NOT NULL DEFAULT 0")
    # The members of a deleted room, who may still read its tombstones.
    db.execute(
        """CREATE TABLE departed (
            bucket INTEGER NOT NULL,
            principal TEXT NOT NULL,
            PRIMARY KEY (bucket, principal)
        ) STRICT, WITHOUT ROWID"""
    )


SEARCH_INDEX = "CREATE VIRTUAL TABLE atoms_fts USING fts5(body, concepts, content='', tokenize='ascii')"


def rebuild_search(db: sqlite3.Connection, language: str) -> None:
    """Empty the search index and schedule the reindex of every entry in `language` (inside a transaction).

    The `ascii` tokenizer only splits at ASCII punctuation and folds ASCII case: the tokens engine/fts.py
    made (stamped, folded, stemmed, space-separated) are the index's terms exactly, as on PostgreSQL.
    """
    db.execute("DROP TABLE IF EXISTS atoms_fts")
    db.execute(SEARCH_INDEX)
    fts.set_meta(db, fts.LANGUAGE_KEY, language)
    fts.schedule(db)


@migration(7, "search stems words and indexes concepts")
def m007_stemmed_search(db: sqlite3.Connection) -> None:
    # Every entry is indexed again, by `reindex` in bounded batches after this (see docs/server.md).
    rebuild_search(db, fts.language_of(db))


@migration(8, "durable consumers")
def m008_consumers(db: sqlite3.Connection) -> None:
    # Each principal's named readers' positions per scope (engine/consumers.py, docs/consumers.md).
    db.execute(
        """CREATE TABLE consumers (
            principal TEXT NOT NULL,
            consumer TEXT NOT NULL,
            scope TEXT NOT NULL,
            created_at INTEGER,
            boundary_ids TEXT NOT NULL,
            updated_at INTEGER NOT NULL,
            host TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (principal, consumer, scope)
        ) STRICT, WITHOUT ROWID"""
    )


def migrate(db: sqlite3.Connection, upto: int | None = None) -> int:
    """Apply every pending step (up to `upto`: an older schema, for tests), each in its own `BEGIN IMMEDIATE`
    transaction, then finish a reindex under way (`reindex`); returns the version."""
    version = MIGRATIONS.run(
        db, read=user_version, record=set_user_version, transaction=lambda: immediate(db), upto=upto
    )
    # A newer mnemo's reindex is its own (its rule may differ): the caller refuses that store.
    if upto is None and version <= MIGRATIONS.latest and fts.pending(db) is not None:
        reindex(db)
    return version


def reindex(db: sqlite3.Connection, batch: int | None = None) -> int:
    """Index the entries a reindex has not reached yet, `batch` a transaction; returns how many were indexed.

    Each batch records how far it reached in the transaction that indexed it, so a reindex stopped
    anywhere (a kill, a full disk) goes on from there at the next open, and two processes opening
    the store at once share the work instead of repeating it. Writers wait for one batch at most;
    readers never wait (WAL). Progress goes to the `mnemo.engine` log (stderr unless configured).
    """
    import logging

    log = logging.getLogger("mnemo.engine")
    indexed, said = 0, 0
    while True:
        with immediate(db):
            language = fts.language_of(db)
            found = fts.next_batch(db, batch or fts.REINDEX_BATCH)
            if found is None:
                return indexed
            rows, reached, done = found
            fts.add(db, rows, language)
        indexed += len(rows)
        said = fts.tell_reindex(log, said, indexed, done, language, reached)
        if done:
            return indexed


LATEST = MIGRATIONS.latest
