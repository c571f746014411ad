"""Provides the embedded SQLite store: connections, writes, the keyset feed, search, get and delete."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mnemo_tui import timefmt
from mnemo_tui.engine import cursor as cursors
from mnemo_tui.engine import ids
from mnemo_tui.engine.schema import LATEST, migrate
from mnemo_tui.errors import Forbidden, LocalStateError, NotFound, ValidationError
from mnemo_tui.model import (
    MAX_CONCEPTS,
    MAX_CONTENT,
    MAX_DOMAIN,
    MAX_EXTERNAL_REF,
    MAX_METADATA_BYTES,
    MAX_SUPERSEDES,
    Entry,
    Page,
    RecentQuery,
    SearchHit,
    SearchQuery,
    WriteRequest,
    WriteResult,
    parse_scope,
    room_of,
)
from mnemo_tui.sqlitefile import create_whole, long_enough

BUSY_TIMEOUT_MS = 30_000
_FEED_COLUMNS = "a.created_at, a.atom_id, a.wire, a.superseded_by"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def with_superseded_by(wire: str, superseded_by: str | None) -> str:
    """The stored wire item, plus `superseded_by` when the entry has been replaced."""
    if superseded_by is None:
        return wire
    return f'{wire[:-1]},"superseded_by":"{superseded_by}"}}'


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


class Store:
    """One embedded store file, read and written on behalf of principals.

    Every method takes the acting principal explicitly: the CLI passes its own, the server the
    one its API key maps to. One `Store` holds one connection; open one per thread.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).resolve()
        self.db = connect(self.path)
        self.secret = bytes(self.db.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()[0])
        self.filter_superseded = True
        self._lock = threading.RLock()

    def close(self) -> None:
        self.db.close()

    # -- transactions ---------------------------------------------------------------------

    def _begin(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def _own_bucket(self, principal: str, *, create: bool) -> int | None:
        row = self.db.execute("SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?", (principal,)).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        cur = self.db.execute("INSERT INTO buckets(kind, owner) VALUES ('own', ?)", (principal,))
        return int(cur.lastrowid or 0)

    def _room_bucket_for_write(self, principal: str, room_id: str) -> int:
        row = self.db.execute(
            "SELECT r.bucket, m.scope FROM members m JOIN rooms r ON r.room_id = m.room_id "
            "WHERE m.room_id = ? AND m.principal = ?",
            (room_id, principal),
        ).fetchone()
        if row is None:
            raise Forbidden("you are not a member of this room (or it does not exist)")
        if row[1] != "read_write":
            raise Forbidden("your membership of this room is read-only")
        return int(row[0])

    def _next_instant(self, bucket: int) -> int:
        """The engine's clock for a bucket, inside the write transaction: strictly increasing."""
        last = int(self.db.execute("SELECT last_created_at FROM buckets WHERE bucket = ?", (bucket,)).fetchone()[0])
        created = max(timefmt.now_us(), last + 1)
        self.db.execute("UPDATE buckets SET last_created_at = ? WHERE bucket = ?", (created, bucket))
        return created

    # -- writes ---------------------------------------------------------------------------

    def write(self, principal: str, req: WriteRequest) -> WriteResult:
        """Store one entry; a repeated `external_ref` returns the first atom instead.

        Raises:
            ValidationError: content, domain, concepts, metadata or supersedes out of bounds.
            Forbidden: writing to a room one is not a read_write member of.
            NotFound: a superseded id that is not an entry of one's own store.
        """
        _check_write(req)
        metadata = _dumps(req.metadata) if req.metadata is not None else None
        if metadata is not None and len(metadata.encode()) > MAX_METADATA_BYTES:
            raise ValidationError(f"metadata is at most {MAX_METADATA_BYTES} bytes serialized")
        room_id = room_of(req.domain)
        with self._lock:
            self._begin()
            try:
                bucket = (
                    self._room_bucket_for_write(principal, room_id)
                    if room_id is not None
                    else self._own_bucket(principal, create=True)
                )
                assert bucket is not None
                if req.external_ref is not None:
                    row = self.db.execute(
                        "SELECT atom_id, supersedes FROM atoms WHERE bucket = ? AND external_ref = ?",
                        (bucket, req.external_ref),
                    ).fetchone()
                    if row is not None:
                        self.db.execute("COMMIT")
                        return WriteResult(atom_id=row[0], superseded=tuple(json.loads(row[1] or "[]")), created=False)
                for old in req.supersedes:
                    found = self.db.execute(
                        "SELECT superseded_by FROM atoms WHERE atom_id = ? AND bucket = ?", (old, bucket)
                    ).fetchone()
                    if found is None:
                        raise NotFound(f"cannot supersede {old}: no such entry in your own store")
                    if found[0] is not None:
                        raise ValidationError(f"cannot supersede {old}: it is already superseded by {found[0]}")
                created = self._next_instant(bucket)
                new_id = ids.atom_id()
                self._insert(bucket, principal, req, new_id, created, metadata)
                if req.supersedes:
                    self.db.executemany(
                        "UPDATE atoms SET superseded_by = ? WHERE atom_id = ?",
                        [(new_id, old) for old in req.supersedes],
                    )
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        return WriteResult(atom_id=new_id, superseded=tuple(req.supersedes))

    def _insert(
        self, bucket: int, principal: str, req: WriteRequest, atom: str, created: int, metadata: str | None
    ) -> None:
        self.db.execute(
            "INSERT INTO atoms(atom_id, bucket, domain, created_at, content, concepts, metadata, principal, agent,"
            " agent_name, client_env, external_ref, supersedes, wire) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                atom,
                bucket,
                req.domain,
                created,
                req.content,
                _dumps(list(req.concepts)),
                metadata,
                principal,
                req.agent,
                req.agent_name,
                req.client_env,
                req.external_ref,
                _dumps(list(req.supersedes)) if req.supersedes else None,
                wire_item(atom, req, created, principal),
            ),
        )

    def bulk_write(self, principal: str, rows: list[tuple[WriteRequest, int]]) -> int:
        """Insert many entries in one transaction (demo data); each row is (request, wanted created_at).

        Times are still forced strictly increasing per bucket, so the feed's guarantees hold.
        """
        with self._lock:
            self._begin()
            try:
                count = 0
                buckets: dict[str, int] = {}
                for req, wanted in sorted(rows, key=lambda r: r[1]):
                    room_id = room_of(req.domain)
                    key = req.domain if room_id else ""
                    if key not in buckets:
                        if room_id:
                            buckets[key] = self._room_bucket_for_write(principal, room_id)
                        else:
                            own = self._own_bucket(principal, create=True)
                            assert own is not None
                            buckets[key] = own
                    bucket = buckets[key]
                    last = int(
                        self.db.execute("SELECT last_created_at FROM buckets WHERE bucket = ?", (bucket,)).fetchone()[0]
                    )
                    created = max(wanted, last + 1)
                    self.db.execute("UPDATE buckets SET last_created_at = ? WHERE bucket = ?", (created, bucket))
                    self._insert(bucket, principal, req, ids.atom_id(), created, None)
                    count += 1
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        return count

    # -- the feed -------------------------------------------------------------------------

    def _scoped(self, principal: str, scope: str | None, select: str, source: str) -> tuple[str, list[Any]]:
        """`SELECT ... FROM source ... WHERE <the scope>`: one own domain, all of them, or a room.

        A room is read through `members`: the statement returns no rows to a non-member.
        """
        room_id = room_of(scope)
        if room_id is not None:
            sql = (
                f"SELECT {select} FROM {source} JOIN rooms r ON r.bucket = a.bucket "
                "JOIN members m ON m.room_id = r.room_id WHERE r.room_id = ? AND m.principal = ?"
            )
            return sql, [room_id, principal]
        bucket = self._own_bucket(principal, create=False)
        sql = f"SELECT {select} FROM {source} WHERE a.bucket = ?"
        params: list[Any] = [-1 if bucket is None else bucket]
        if scope is not None:
            sql += " AND a.domain = ?"
            params.append(scope)
        return sql, params

    def _filtered(self, q: RecentQuery | SearchQuery) -> tuple[str, list[Any]]:
        """The time, author and supersession conditions shared by the feed and search."""
        sql, params = "", list[Any]()
        if q.since is not None:
            sql += " AND a.created_at >= ?"
            params.append(q.since)
        if q.until is not None:
            sql += " AND a.created_at <= ?"
            params.append(q.until)
        if q.exclude_author is not None:
            sql += " AND a.principal != ?"
            params.append(q.exclude_author)
        # Room entries cannot be superseded, so the filter is inert there.
        if self.filter_superseded and not q.include_history and room_of(q.scope) is None:
            sql += " AND a.superseded_by IS NULL"
        return sql, params

    def _feed_sql(self, principal: str, q: RecentQuery, position: tuple[int, str] | None) -> tuple[str, list[Any]]:
        sql, params = self._scoped(principal, q.scope, _FEED_COLUMNS, "atoms a")
        if position is not None:
            sql += " AND (a.created_at, a.atom_id) < (?, ?)"
            params += list(position)
        more, extra = self._filtered(q)
        return sql + more + " ORDER BY a.created_at DESC, a.atom_id DESC", params + extra

    def _position(self, principal: str, q: RecentQuery) -> tuple[int, str] | None:
        if q.cursor is None:
            return None
        return cursors.decode(self.secret, cursors.binding(principal, q), q.cursor)

    def _require_member(self, principal: str, room_id: str) -> None:
        row = self.db.execute(
            "SELECT 1 FROM members WHERE room_id = ? AND principal = ?", (room_id, principal)
        ).fetchone()
        if row is None:
            raise Forbidden("you are not a member of this room (or it does not exist)")

    def recent(self, principal: str, q: RecentQuery) -> Page:
        """One page of the feed, newest first, with the cursor of the next page (None at the end).

        Raises:
            ValidationError: bad limit, scope, times or cursor.
            Forbidden: a room the principal is not a member of, or that does not exist.
        """
        q.validated()
        position = self._position(principal, q)
        sql, params = self._feed_sql(principal, q, position)
        with self._lock:
            rows = self.db.execute(sql + " LIMIT ?", (*params, q.limit + 1)).fetchall()
            room_id = room_of(q.scope)
            if not rows and room_id is not None:
                self._require_member(principal, room_id)
        more = len(rows) > q.limit
        rows = rows[: q.limit]
        items = [Entry(atom_id=r[1], created_at=r[0], wire=with_superseded_by(r[2], r[3])) for r in rows]
        next_cursor = None
        if more:
            last = rows[-1]
            next_cursor = cursors.encode(self.secret, cursors.binding(principal, q), last[0], last[1])
        return Page(items=items, next_cursor=next_cursor)

    def stream_wire(self, principal: str, q: RecentQuery, chunk: int = 2000) -> Iterator[list[str]]:
        """Every remaining entry of a walk as wire JSON strings, in chunks, from one statement.

        One statement reads one snapshot, so the stream holds exactly the entries that existed
        when it began: the same promise as a cursor walk, at a fraction of the cost.
        """
        q.validated()
        position = self._position(principal, q)
        sql, params = self._feed_sql(principal, q, position)
        room_id = room_of(q.scope)
        if room_id is not None:
            with self._lock:
                self._require_member(principal, room_id)
        cur = self.db.cursor()
        try:
            cur.execute(sql, params)
            history = q.include_history
            while True:
                rows = cur.fetchmany(chunk)
                if not rows:
                    return
                if history:
                    yield [with_superseded_by(r[2], r[3]) for r in rows]
                else:
                    yield [r[2] for r in rows]
        finally:
            cur.close()

    def change_token(self) -> tuple[int, int]:
        """A cheap token that changes whenever the store's contents may have changed.

        `PRAGMA data_version` moves when another connection commits; `total_changes` when this
        one writes. Watchers (the TUI) compare tokens instead of re-reading the feed.
        """
        with self._lock:
            version = int(self.db.execute("PRAGMA data_version").fetchone()[0])
            return version, self.db.total_changes

    def has_entries(self, principal: str, scope: str | None) -> bool:
        """Whether a scope holds any visible entry at all (for empty reports)."""
        page = self.recent(principal, RecentQuery(scope=scope, limit=1))
        return bool(page.items)

    # -- single atoms ---------------------------------------------------------------------

    def _readable_atom(self, principal: str, atom: str) -> sqlite3.Row | tuple[Any, ...]:
        row = self.db.execute(
            "SELECT a.created_at, a.atom_id, a.wire, a.superseded_by, a.bucket, b.kind, b.owner "
            "FROM atoms a JOIN buckets b ON b.bucket = a.bucket "
            "WHERE a.atom_id = ? AND ((b.kind = 'own' AND b.owner = ?) OR (b.kind = 'room' AND EXISTS ("
            "SELECT 1 FROM members m WHERE m.room_id = b.owner AND m.principal = ?)))",
            (atom, principal, principal),
        ).fetchone()
        if row is None:
            raise NotFound(f"no entry {atom}")
        return tuple(row)

    def get(self, principal: str, atom: str) -> Entry:
        """One entry of one's own store or of a room one belongs to.

        Raises:
            NotFound: unknown or unreadable atom.
        """
        with self._lock:
            row = self._readable_atom(principal, atom)
        return Entry(atom_id=row[1], created_at=row[0], wire=with_superseded_by(row[2], row[3]))

    def delete(self, principal: str, atom: str) -> int:
        """Delete one entry of one's own store (administrative); returns how many rows went (0 or 1)."""
        with self._lock:
            self._begin()
            try:
                bucket = self._own_bucket(principal, create=False)
                cur = self.db.execute("DELETE FROM atoms WHERE atom_id = ? AND bucket = ?", (atom, bucket))
                # A successor that pointed at nothing any more keeps its `supersedes` list (history).
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        return cur.rowcount

    def domains(self, principal: str) -> list[str]:
        """The principal's own domains, sorted."""
        with self._lock:
            bucket = self._own_bucket(principal, create=False)
            if bucket is None:
                return []
            rows = self.db.execute(
                "SELECT DISTINCT domain FROM atoms WHERE bucket = ? ORDER BY domain", (bucket,)
            ).fetchall()
        return [r[0] for r in rows]

    # -- search ---------------------------------------------------------------------------

    def search(self, principal: str, q: SearchQuery) -> list[SearchHit]:
        """Full-text search (FTS5, bm25) over one scope; user text is quoted into phrases.

        Raises:
            ValidationError: an empty query or out-of-range fields.
            Forbidden: a room one is not a member of.
        """
        match = fts_query(q.query)
        if not 1 <= q.top_k <= 500:
            raise ValidationError("top_k must be between 1 and 500")
        if q.since is not None and q.until is not None and q.until < q.since:
            raise ValidationError("until is before since")
        room_id = room_of(q.scope)
        with self._lock:
            sql, params = self._scoped(
                principal,
                q.scope,
                f"{_FEED_COLUMNS}, bm25(atoms_fts) AS score",
                "atoms_fts JOIN atoms a ON a.seq = atoms_fts.rowid",
            )
        sql += " AND atoms_fts MATCH ?"
        params.append(match)
        more, extra = self._filtered(q)
        sql += more
        params += extra
        order = "score ASC, a.created_at DESC" if q.order_by == "relevance" else "a.created_at DESC, a.atom_id DESC"
        sql += f" ORDER BY {order} LIMIT ?"
        params.append(q.top_k)
        with self._lock:
            rows = self.db.execute(sql, params).fetchall() if match else []
            if not rows and room_id is not None:
                self._require_member(principal, room_id)
        # bm25 is negative, stronger matches lower; relevance is the strength relative to the best hit.
        strongest = max((-float(r[4]) for r in rows), default=0.0) or 1.0
        return [
            SearchHit(
                entry=Entry(atom_id=r[1], created_at=r[0], wire=with_superseded_by(r[2], r[3])),
                relevance=round(max(0.0, -float(r[4])) / strongest, 6),
            )
            for r in rows
        ]


def fts_query(text: str) -> str:
    """Quote user text into an FTS5 expression: each word a phrase, any of them matching.

    Raises:
        ValidationError: an empty or blank query (the feed is the read without a query).
    """
    if not text or not text.strip():
        raise ValidationError("search needs a query; to list what happened lately, use `mnemo recent`")
    if len(text) > 5000:
        raise ValidationError("query is at most 5000 characters")
    phrases = []
    # FTS5 ends a string at NUL ("unterminated string"): a NUL separates words instead.
    for word in text.replace("\x00", " ").split():
        if any(ch.isalnum() for ch in word):
            phrases.append('"' + word.replace('"', '""') + '"')
    return " OR ".join(phrases)


def wire_item(atom: str, req: WriteRequest, created: int, principal: str) -> str:
    """The entry's wire `RecentItem` as JSON, built once at write time (entries are immutable)."""
    item: dict[str, Any] = {
        "atom_id": atom,
        "content": req.content,
        "domain": req.domain,
        "created_at": timefmt.to_iso(created),
        "concepts": list(req.concepts),
        "provenance": {
            "principal": principal,
            "agent": req.agent,
            "agent_name": req.agent_name,
            "client_env": req.client_env,
            "is_external": False,
        },
    }
    if req.supersedes:
        item["supersedes"] = list(req.supersedes)
    return _dumps(item)


def _check_write(req: WriteRequest) -> None:
    if not isinstance(req.content, str) or not 1 <= len(req.content) <= MAX_CONTENT:
        raise ValidationError(f"content must be 1 to {MAX_CONTENT} characters")
    if room_of(req.domain) is None:
        if not req.domain or not req.domain.strip() or len(req.domain) > MAX_DOMAIN:
            raise ValidationError(f"domain must be 1 to {MAX_DOMAIN} characters")
    else:
        parse_scope(req.domain)
        if req.supersedes:
            raise ValidationError("room entries cannot supersede (supersedes is refused with an xroom: domain)")
    if len(req.concepts) > MAX_CONCEPTS:
        raise ValidationError(f"at most {MAX_CONCEPTS} concepts")
    if req.external_ref is not None and not 1 <= len(req.external_ref) <= MAX_EXTERNAL_REF:
        raise ValidationError(f"external_ref must be 1 to {MAX_EXTERNAL_REF} characters")
    if len(req.supersedes) > MAX_SUPERSEDES:
        raise ValidationError(f"supersedes takes at most {MAX_SUPERSEDES} ids")
    if len(set(req.supersedes)) != len(req.supersedes):
        raise ValidationError("supersedes ids must be distinct")
    if req.supersedes:
        import uuid  # only a superseding write needs it; `mnemo recent` never pays for the import
    for old in req.supersedes:
        try:
            uuid.UUID(old)
        except ValueError:
            raise ValidationError(f"supersedes: {old!r} is not an atom id") from None
