"""Provides the embedded store's entries one by one: writes (one insert path for one entry or a million), get, delete."""

from __future__ import annotations

import json
import sqlite3
from functools import cache
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine import ids
from mnemo_tui.engine.dialect import SQLITE
from mnemo_tui.engine.rules import author_of, check_read, check_write, spliced_entry, wire_item
from mnemo_tui.engine.tombstones import TombstoneOps
from mnemo_tui.errors import Forbidden, NotFound, ValidationError
from mnemo_tui.limits import ROOM_DELETE_RULE, dumps, room_of
from mnemo_tui.values.model import Entry

if TYPE_CHECKING:
    from typing import Any

    from mnemo_tui.engine.dialect import Dialect
    from mnemo_tui.values.writes import WriteRequest, WriteResult

    Row = tuple[str, WriteRequest, int]

_COLUMNS = (
    "atom_id, bucket, domain, created_at, content, concepts, metadata, principal, agent,"
    " agent_name, client_env, external_ref, supersedes, wire, fingerprint"
)


@cache
def insert_sql(dialect: Dialect) -> str:
    """The statement inserting one atom: the shared columns, then the dialect's own (`Dialect.atom_columns`)."""
    columns = ", ".join((_COLUMNS, *(name for name, _ in dialect.atom_columns)))
    values = ",".join(("?",) * 15 + tuple(placeholder for _, placeholder in dialect.atom_columns))
    return f"INSERT INTO atoms({columns}) VALUES ({values})"


@cache
def by_prefix(dialect: Dialect) -> str:
    """One range over the unique index of atom_id, restricted to one's own bucket and one's rooms (atoms read first,
    by its atom_id range)."""
    return (
        "SELECT a.created_at, a.atom_id, a.wire, a.superseded_by FROM atoms a "
        f"{dialect.outer_first_join} buckets b ON b.bucket = a.bucket "
        "WHERE a.atom_id >= ? AND a.atom_id < ? AND ((b.kind = 'own' AND b.owner = ?) OR (b.kind = 'room' "
        "AND EXISTS (SELECT 1 FROM members m WHERE m.room_id = b.owner AND m.principal = ?))) "
        "ORDER BY a.atom_id LIMIT ?"
    )


BY_PREFIX = by_prefix(SQLITE)  # the embedded engine's (tests/engine read its plan)


# Who may delete an entry, as one condition on the row being deleted (parameters: atom id, own bucket,
# principal twice): one's own store's entries; in a room one is a member of (our extension beyond the
# hosted rules, docs/server.md), the entries one wrote while a read_write member, and every entry of a
# room one owns.
DELETABLE = (
    "atom_id = ? AND (bucket = ? OR EXISTS (SELECT 1 FROM rooms r JOIN members m ON m.room_id = r.room_id "
    "WHERE r.bucket = atoms.bucket AND m.principal = ? AND (m.role = 'owner' OR "
    "(m.scope = 'read_write' AND atoms.principal = ?))))"
)


class AtomOps(TombstoneOps):
    """Writes, reads and deletes of single entries."""

    def write(self, principal: str, req: WriteRequest) -> WriteResult:
        """Store one entry; a repeated `external_ref` returns the first atom instead.

        Raises:
            ValidationError: content, domain, concepts, metadata or supersedes out of bounds.
            Forbidden: writing to a room one is not a read_write member of.
            NotFound: a superseded id that is not an entry of one's own store.
        """
        return self._insert_rows([(principal, req, timefmt.now_us())])[0]

    def bulk_insert(self, rows: list[Row]) -> int:
        """Insert many entries in one transaction; each row is (principal, request, wanted created_at).

        The engine's clock still forces times strictly increasing per bucket (`max(wanted, last + 1)`),
        so the feed's guarantees hold whatever times are wanted. Returns how many entries were created.
        """
        return sum(1 for result in self._insert_rows(rows) if result.created)

    def _insert_rows(self, rows: list[Row]) -> list[WriteResult]:
        """The one insert path: every write, single or bulk, goes through it in one transaction."""
        checked = [(principal, req, wanted, check_write(req)) for principal, req, wanted in rows]
        with self.transaction() as db:
            return self.insert_checked(db, checked)

    def insert_checked(self, db: Any, checked: list[tuple[str, WriteRequest, int, str | None]]) -> list[WriteResult]:
        """The one insert path inside a write transaction: rows of (principal, request, wanted created_at,
        its metadata as `check_write` serialized it)."""
        from mnemo_tui.values.writes import KeptWrite, WriteResult

        results: list[WriteResult] = []
        deferred: list[tuple[Any, ...]] = []
        before = self.index_mark(db)
        clock = self.clock(db)
        buckets: dict[tuple[str, str], int] = {}
        for principal, req, wanted, metadata in sorted(checked, key=lambda r: r[2]) if len(checked) > 1 else checked:
            key = (principal, req.domain if room_of(req.domain) else "")
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = self.writable_bucket(principal, req.domain)
            if req.external_ref is not None:
                row = db.execute(
                    "SELECT atom_id, supersedes FROM atoms WHERE bucket = ? AND external_ref = ?",
                    (bucket, req.external_ref),
                ).fetchone()
                if row is not None:
                    results.append(WriteResult(row[0], tuple(json.loads(row[1] or "[]")), created=False))
                    continue
            for old in req.supersedes:
                found = db.execute(
                    "SELECT superseded_by FROM atoms WHERE atom_id = ? AND bucket = ?", (old, bucket)
                ).fetchone()
                if found is None:
                    raise NotFound(f"cannot supersede {old}: no such entry in your own store")
                if found[0] is not None:
                    raise ValidationError(f"cannot supersede {old}: it is already superseded by {found[0]}")
            created = clock.next(bucket, wanted)
            # An import keeps the entry's id and author; the bucket is still the importer's to write.
            atom, author = (req.atom_id, req.author) if isinstance(req, KeptWrite) else (ids.atom_id(), principal)
            agent, agent_name, client_env = author_of(req)  # as the wire item has them: normalized
            params = (
                atom,
                bucket,
                req.domain,
                created,
                req.content,
                dumps(list(req.concepts)) if req.concepts else "[]",
                metadata,
                author,
                agent,
                agent_name,
                client_env,
                req.external_ref,
                dumps(list(req.supersedes)) if req.supersedes else None,
                wire_item(atom, req, created, author),
                req.fingerprint,
                *self.index_columns(bucket, req.content, tuple(req.concepts)),
            )
            if req.external_ref is not None or req.supersedes:
                # Later rows of the batch must see this one (a repeated ref, a second supersession).
                db.execute(insert_sql(self.dialect), params)
                db.executemany(
                    "UPDATE atoms SET superseded_by = ? WHERE atom_id = ?", [(atom, old) for old in req.supersedes]
                )
            else:
                deferred.append(params)
            results.append(WriteResult(atom, tuple(req.supersedes), True))  # in field order: the quick way
        db.executemany(insert_sql(self.dialect), deferred)
        self.index_since(db, before)
        clock.save()
        return results

    def get(self, principal: str, atom: str) -> Entry:
        """One entry of one's own store or of a room one belongs to.

        Raises:
            NotFound: unknown or unreadable atom.
        """
        check_read(("atom_id", atom))
        with self.reading() as db:
            row = db.execute(
                "SELECT a.created_at, a.atom_id, a.wire, a.superseded_by FROM atoms a "
                "JOIN buckets b ON b.bucket = a.bucket "
                "WHERE a.atom_id = ? AND ((b.kind = 'own' AND b.owner = ?) OR (b.kind = 'room' AND EXISTS ("
                "SELECT 1 FROM members m WHERE m.room_id = b.owner AND m.principal = ?)))",
                (atom, principal, principal),
            ).fetchone()
        if row is None:
            raise NotFound(f"no entry {atom}")
        return spliced_entry(row)

    def by_prefix(self, principal: str, prefix: str, limit: int = 6) -> list[Entry]:
        """The readable entries whose id starts with `prefix` (lower-case hex and hyphens), at most `limit`.

        One indexed query: a range over the unique index of atom_id, restricted to one's own
        bucket and the rooms one belongs to.
        """
        if not prefix or any(c not in "0123456789abcdef-" for c in prefix):
            return []
        high = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        with self.reading() as db:
            rows = db.execute(
                by_prefix(self.dialect),
                (prefix, high, principal, principal, limit),
            ).fetchall()
        return [spliced_entry(r) for r in rows]

    def delete(self, principal: str, atom: str) -> int:
        """Delete one entry (administrative); returns how many rows went (0 or 1).

        One's own entries; in a room (our extension, docs/server.md), an entry's author while a
        read_write member, or the room's owner: `delete_one` decides it in its delete statement.
        An entry one cannot read counts 0, as an unknown one (reads answer both alike).

        Deleting a successor makes what it superseded the live tip again: nothing leaves the
        default feed because of a revision that is gone. A successor whose predecessor is deleted
        keeps its `supersedes` list (history).

        Raises:
            Forbidden: a secret of one's vault, or a room entry one reads but may not delete.
        """
        check_read(("atom_id", atom))
        with self.transaction() as db:
            bucket = self.own_bucket(principal)
            deleted = self.delete_one(db, principal, bucket, atom)
            if deleted == 0:
                self._refuse_delete(db, principal, atom)
            return deleted

    def _refuse_delete(self, db: Any, principal: str, atom: str) -> None:
        """Why nothing was deleted, said only where the reader may know the entry exists (the decision was made)."""
        if db.execute("SELECT 1 FROM vault WHERE atom_id = ? AND principal = ?", (atom, principal)).fetchone():
            raise Forbidden(f"{atom} is a secret of your vault: `mnemo delete` deletes entries, not secrets")
        room = db.execute(
            "SELECT r.name FROM atoms a JOIN rooms r ON r.bucket = a.bucket "
            "JOIN members m ON m.room_id = r.room_id AND m.principal = ? WHERE a.atom_id = ?",
            (principal, atom),
        ).fetchone()
        if room is not None:
            raise Forbidden(f"{atom} is an entry of room {room[0]!r}: {ROOM_DELETE_RULE}")

    def atom_extras(self, atom_ids: list[str]) -> dict[str, tuple[dict[str, Any], str | None]]:
        """(metadata, external_ref) of each id; callers pass only ids the principal may already read."""
        if not atom_ids:
            return {}
        named, values = self.dialect.one_of("atom_id", atom_ids)
        with self.reading() as db:
            rows = db.execute(f"SELECT atom_id, metadata, external_ref FROM atoms WHERE {named}", values).fetchall()
        return {r[0]: (json.loads(r[1]) if r[1] else {}, r[2]) for r in rows}

    def delete_one(self, db: Any, principal: str, own: int | None, atom: str) -> int:
        """The one delete path of a single atom: who may delete it is decided in the statement that deletes
        it (`DELETABLE`: no check-then-act), the index entry goes with the row, what the deleted atom
        superseded becomes the live tip again, and a tombstone stays (engine/tombstones.py). `own` is the
        principal's own bucket (None: it has none)."""
        found = db.execute("SELECT bucket FROM atoms WHERE atom_id = ?", (atom,)).fetchone()
        if found is None:
            return 0
        # The bucket's clock first (PostgreSQL: its row lock, as writers take it before any atom row).
        clock, at = self.removal_time(db, int(found[0]))
        rows = db.execute(
            f"DELETE FROM atoms WHERE {DELETABLE} RETURNING seq, bucket, content, domain, concepts",
            (atom, own, principal, principal),
        ).fetchall()
        if not rows:
            return 0
        self.unindex(db, [(r[0], r[1], r[2], r[4]) for r in rows])
        db.execute("UPDATE atoms SET superseded_by = NULL WHERE superseded_by = ? AND bucket = ?", (atom, rows[0][1]))
        db.execute("DELETE FROM feedback WHERE atom_id = ?", (atom,))
        clock.save()
        self.bury_one(db, int(rows[0][1]), atom, str(rows[0][3]), at)
        return len(rows)

    def delete_set(self, db: sqlite3.Connection, bucket: int, domain: str | None = None, *, reason: str) -> int:
        """The delete path of a set (a domain of a bucket, or the whole bucket): what `delete_one` does for
        each atom, in a fixed number of statements whatever the set's size, so a 10,000-entry room is
        deleted within a request's deadline (one statement per atom scanned the bucket for each). Its
        tombstones are written in one statement at one instant of the bucket's clock (`reason`: why)."""
        where, params = ("bucket = ?", (bucket,)) if domain is None else ("bucket = ? AND domain = ?", (bucket, domain))
        self.bury_set(db, bucket, where, params, reason)
        self.unindex(
            db, db.execute(f"SELECT seq, bucket, content, concepts FROM atoms WHERE {where}", params).fetchall()
        )
        if domain is not None:  # a whole bucket leaves no predecessor behind
            db.execute(
                "UPDATE atoms SET superseded_by = NULL WHERE bucket = ? AND domain <> ? AND superseded_by IN "
                "(SELECT atom_id FROM atoms WHERE bucket = ? AND domain = ?)",
                (bucket, domain, bucket, domain),
            )
        db.execute(f"DELETE FROM feedback WHERE atom_id IN (SELECT atom_id FROM atoms WHERE {where})", params)
        return int(db.execute(f"DELETE FROM atoms WHERE {where}", params).rowcount)
