"""Provides the PostgreSQL engine's schema: numbered migrations, the same tables as the embedded store's.

Every text column sorts by code point (`COLLATE "C"`), as SQLite does, so a feed's keyset order,
`domains()` and every listing read the same on both engines whatever the database's locale.
Statements here are plain SQL with `?` parameters, run by the one runner (mnemo_tui/migrations.py)
from engine/postgres/migrations.py, inside one transaction per step, under an advisory lock.
"""

from __future__ import annotations

from typing import Any, Protocol

from mnemo_tui.engine import fts
from mnemo_tui.migrations import Migrations


class Executes(Protocol):
    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any: ...


# Each step is applied in its own transaction under the migration lock (engine/postgres/migrations.py); a
# reindex it schedules is run after it, a batch a transaction (it needs the Python tokenizer).
MIGRATIONS: Migrations[Executes] = Migrations()
migration = MIGRATIONS.step  # @migration(number, name) registers the next step
T = 'text COLLATE "C"'

_INITIAL = [
    f"CREATE TABLE meta (key {T} PRIMARY KEY, value bytea NOT NULL)",
    # A bucket is one store: a principal's own store or a room. Its row is also the lock that
    # orders its writers (see docs/architecture.md): `last_created_at` is read FOR UPDATE.
    f"""CREATE TABLE buckets (
        bucket bigserial PRIMARY KEY,
        kind {T} NOT NULL CHECK (kind IN ('own', 'room')),
        owner {T} NOT NULL,
        last_created_at bigint NOT NULL DEFAULT 0,
        UNIQUE (kind, owner)
    )""",
    f"""CREATE TABLE atoms (
        seq bigserial PRIMARY KEY,
        atom_id {T} NOT NULL UNIQUE,
        bucket bigint NOT NULL REFERENCES buckets(bucket),
        domain {T} NOT NULL,
        created_at bigint NOT NULL,
        content {T} NOT NULL,
        concepts {T} NOT NULL,
        metadata {T},
        principal {T} NOT NULL,
        agent {T},
        agent_name {T},
        client_env {T},
        external_ref {T},
        supersedes {T},
        superseded_by {T},
        wire {T} NOT NULL,
        fingerprint {T}
    )""",
    "CREATE INDEX atoms_feed ON atoms (bucket, created_at, atom_id)",
    "CREATE INDEX atoms_domain_feed ON atoms (bucket, domain, created_at, atom_id)",
    "CREATE UNIQUE INDEX atoms_external_ref ON atoms (bucket, external_ref) WHERE external_ref IS NOT NULL",
    "CREATE INDEX atoms_fingerprint ON atoms (bucket, fingerprint) WHERE fingerprint IS NOT NULL",
    f"""CREATE TABLE rooms (
        room_id {T} PRIMARY KEY,
        bucket bigint NOT NULL UNIQUE REFERENCES buckets(bucket),
        name {T} NOT NULL,
        description {T},
        owner {T} NOT NULL,
        created_at bigint NOT NULL,
        archived integer NOT NULL DEFAULT 0,
        UNIQUE (owner, name)
    )""",
    f"""CREATE TABLE members (
        room_id {T} NOT NULL REFERENCES rooms(room_id),
        principal {T} NOT NULL,
        role {T} NOT NULL CHECK (role IN ('owner', 'member')),
        scope {T} NOT NULL CHECK (scope IN ('read', 'read_write')),
        joined_at bigint NOT NULL,
        PRIMARY KEY (room_id, principal)
    )""",
    "CREATE INDEX members_by_principal ON members (principal, joined_at)",
    f"""CREATE TABLE invites (
        invite_id {T} PRIMARY KEY,
        room_id {T} NOT NULL REFERENCES rooms(room_id),
        code_hash {T} NOT NULL UNIQUE,
        scope {T} NOT NULL CHECK (scope IN ('read', 'read_write')),
        expires_at bigint NOT NULL,
        max_uses bigint NOT NULL,
        uses bigint NOT NULL DEFAULT 0,
        created_by {T} NOT NULL,
        created_at bigint NOT NULL
    )""",
    f"""CREATE TABLE vault (
        atom_id {T} PRIMARY KEY,
        principal {T} NOT NULL,
        alias {T} NOT NULL,
        context {T} NOT NULL,
        sealed {T} NOT NULL,
        concepts {T} NOT NULL DEFAULT '[]',
        created_at bigint NOT NULL,
        UNIQUE (principal, alias)
    )""",
    f"""CREATE TABLE api_keys (
        key_id {T} PRIMARY KEY,
        principal {T} NOT NULL,
        key_hash {T} NOT NULL UNIQUE,
        created_at bigint NOT NULL,
        revoked_at bigint
    )""",
    f"""CREATE TABLE feedback (
        atom_id {T} NOT NULL,
        bucket bigint NOT NULL,
        outcome double precision NOT NULL,
        at bigint NOT NULL
    )""",
    "CREATE INDEX feedback_by_atom ON feedback (atom_id)",
    "CREATE INDEX feedback_by_bucket ON feedback (bucket)",
    f"""CREATE TABLE idempotency (
        principal {T} NOT NULL,
        key {T} NOT NULL,
        answer {T} NOT NULL,
        at bigint NOT NULL,
        PRIMARY KEY (principal, key)
    )""",
]


@migration(1, "initial")
def m001_initial(db: Executes) -> None:
    import secrets

    for statement in _INITIAL:
        db.execute(statement)
    db.execute("INSERT INTO meta(key, value) VALUES ('cursor_secret', ?)", (secrets.token_bytes(32),))
    db.execute("INSERT INTO meta(key, value) VALUES ('store_id', ?)", (secrets.token_hex(8).encode(),))


@migration(2, "full-text search")
def m002_search(db: Executes) -> None:
    # Each entry's words as a tsvector of bucket-stamped lexemes (engine/fts.py's rule), written by
    # the insert path; a GIN index finds one bucket's postings of a word and nothing else.
    db.execute("ALTER TABLE atoms ADD COLUMN search tsvector NOT NULL DEFAULT ''::tsvector")
    db.execute("CREATE INDEX atoms_search ON atoms USING gin (search)")


@migration(3, "superseded_by indexed")
def m003_superseded_by(db: Executes) -> None:
    # A delete clears `superseded_by` where it names the deleted atom: without an index each delete
    # scanned its bucket (see engine/sqlite/schema.py's migration 5).
    db.execute("CREATE INDEX atoms_superseded_by ON atoms (superseded_by) WHERE superseded_by IS NOT NULL")


@migration(4, "tombstones")
def m004_tombstones(db: Executes) -> None:
    # What every delete path leaves behind (see engine/sqlite/schema.py's migration 6).
    db.execute(
        f"""CREATE TABLE tombstones (
            bucket bigint NOT NULL,
            atom_id {T} NOT NULL,
            domain {T} NOT NULL,
            removed_at bigint NOT NULL,
            reason {T} NOT NULL CHECK (reason IN ('deleted', 'domain_wiped', 'room_deleted', 'reset'))
        )"""
    )
    db.execute("CREATE INDEX tombstones_feed ON tombstones (bucket, removed_at, atom_id)")
    db.execute("ALTER TABLE buckets ADD COLUMN tombstones_dropped bigint NOT NULL DEFAULT 0")
    db.execute(
        f"CREATE TABLE departed (bucket bigint NOT NULL, principal {T} NOT NULL, PRIMARY KEY (bucket, principal))"
    )


SEARCH_INDEX = "CREATE INDEX atoms_search ON atoms USING gin (search)"


def rebuild_search(db: Executes, language: str) -> None:
    """Schedule the reindex of every entry in `language` (inside a transaction; engine/fts.py's meta keys).

    The GIN index is dropped meanwhile and built once at the end: one build of a million entries is
    far cheaper than a million updates of it. No server serves a database whose reindex is under way
    (engine/postgres/migrations.py `migrate`), so nothing searches it meanwhile.
    """
    db.execute("DROP INDEX IF EXISTS atoms_search")
    fts.set_meta(db, fts.LANGUAGE_KEY, language)
    fts.schedule(db)
    if fts.pending(db) is None:
        db.execute(SEARCH_INDEX)


@migration(5, "search stems words and indexes concepts")
def m005_stemmed_search(db: Executes) -> None:
    # Every entry's tsvector is made again (stems, concepts), in bounded batches after this migration
    # (engine/postgres/migrations.py `reindex`); see engine/sqlite/schema.py's migration 7.
    rebuild_search(db, fts.language_of(db))


@migration(6, "durable consumers")
def m006_consumers(db: Executes) -> None:
    # Each principal's named readers' positions per scope (see engine/sqlite/schema.py's migration 8).
    db.execute(
        f"""CREATE TABLE consumers (
            principal {T} NOT NULL,
            consumer {T} NOT NULL,
            scope {T} NOT NULL,
            created_at bigint,
            boundary_ids {T} NOT NULL,
            updated_at bigint NOT NULL,
            host {T} NOT NULL DEFAULT '',
            PRIMARY KEY (principal, consumer, scope)
        )"""
    )


LATEST = MIGRATIONS.latest

# Every table of the embedded store, with the columns both engines hold, in an order that keeps
# every reference valid. `atoms` gains its tsvector on the way.
COPIED: tuple[tuple[str, str], ...] = (
    ("buckets", "bucket, kind, owner, last_created_at"),
    (
        "atoms",
        "seq, atom_id, bucket, domain, created_at, content, concepts, metadata, principal, agent, agent_name, "
        "client_env, external_ref, supersedes, superseded_by, wire, fingerprint",
    ),
    ("rooms", "room_id, bucket, name, description, owner, created_at, archived"),
    ("members", "room_id, principal, role, scope, joined_at"),
    ("invites", "invite_id, room_id, code_hash, scope, expires_at, max_uses, uses, created_by, created_at"),
    ("vault", "atom_id, principal, alias, context, sealed, concepts, created_at"),
    ("api_keys", "key_id, principal, key_hash, created_at, revoked_at"),
    ("feedback", "atom_id, bucket, outcome, at"),
    ("idempotency", "principal, key, answer, at"),
    ("consumers", "principal, consumer, scope, created_at, boundary_ids, updated_at, host"),
)
HOLDS_DATA = ("buckets", "atoms", "rooms", "vault", "api_keys", "feedback", "idempotency")
