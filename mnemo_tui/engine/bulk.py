"""Provides the embedded store's bulk insert: many entries in one transaction and one prepared statement."""

from __future__ import annotations

from typing import Any

from mnemo_tui.engine import ids
from mnemo_tui.engine.store import Store, _check_write, _dumps, wire_item
from mnemo_tui.model import WriteRequest, room_of

_INSERT = (
    "INSERT INTO atoms(atom_id, bucket, domain, created_at, content, concepts, metadata, principal, agent,"
    " agent_name, client_env, external_ref, supersedes, wire) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def bulk_insert(store: Store, rows: list[tuple[str, WriteRequest, int]]) -> int:
    """Insert many entries in one transaction; each row is (principal, request, wanted created_at).

    The same promise as `Store.bulk_write` (times forced strictly increasing per bucket, so no
    entry lands behind a reader's cursor), without its per-row bookkeeping statements: each
    bucket's clock is read once, advanced in memory and written back once. Rows must not carry
    `supersedes` or `external_ref` (use `Store.write` for those).

    Raises:
        ValidationError: a row out of bounds, or carrying supersedes or an external ref.
        Forbidden: a room the principal cannot write to.
    """
    from mnemo_tui.errors import ValidationError

    params: list[tuple[Any, ...]] = []
    with store._lock:
        store.db.execute("BEGIN IMMEDIATE")
        try:
            clocks: dict[int, list[int]] = {}  # bucket -> [bucket, last created_at]
            buckets: dict[tuple[str, str], int] = {}  # (principal, domain or "") -> bucket, membership checked
            for principal, req, wanted in sorted(rows, key=lambda r: r[2]):
                _check_write(req)
                if req.supersedes or req.external_ref is not None:
                    raise ValidationError("bulk rows cannot carry supersedes or an external ref")
                room_id = room_of(req.domain)
                key = (principal, req.domain if room_id else "")
                bucket = buckets.get(key)
                if bucket is None:
                    found = (
                        store._room_bucket_for_write(principal, room_id)
                        if room_id
                        else store._own_bucket(principal, create=True)
                    )
                    assert found is not None
                    bucket = buckets[key] = found
                clock = clocks.get(bucket)
                if clock is None:
                    last = store.db.execute("SELECT last_created_at FROM buckets WHERE bucket = ?", (bucket,))
                    clock = clocks[bucket] = [bucket, int(last.fetchone()[0])]
                created = max(wanted, clock[1] + 1)
                clock[1] = created
                atom = ids.atom_id()
                params.append(
                    (
                        atom,
                        clock[0],
                        req.domain,
                        created,
                        req.content,
                        _dumps(list(req.concepts)),
                        None,
                        principal,
                        req.agent,
                        req.agent_name,
                        req.client_env,
                        None,
                        None,
                        wire_item(atom, req, created, principal),
                    )
                )
            _insert_rows(store, params)
            store.db.executemany(
                "UPDATE buckets SET last_created_at = ? WHERE bucket = ?", [(c[1], c[0]) for c in clocks.values()]
            )
            store.db.execute("COMMIT")
        except BaseException:
            if store.db.in_transaction:
                store.db.execute("ROLLBACK")
            raise
    return len(params)


def _insert_rows(store: Store, params: list[tuple[Any, ...]]) -> None:
    # The FTS5 index fed row by row through its trigger costs several times the insert itself;
    # for a large batch, index the new rows in one statement instead. DDL is transactional in
    # SQLite: inside this write transaction no other writer can insert while the trigger is away,
    # and the trigger comes back verbatim from sqlite_master before the commit.
    trigger = None
    if len(params) >= 1000:
        trigger = store.db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'atoms_fts_insert'"
        ).fetchone()
    if trigger is None:
        store.db.executemany(_INSERT, params)
        return
    before = int(store.db.execute("SELECT coalesce(max(seq), 0) FROM atoms").fetchone()[0])
    store.db.execute("DROP TRIGGER atoms_fts_insert")
    store.db.executemany(_INSERT, params)
    store.db.execute("INSERT INTO atoms_fts(rowid, content) SELECT seq, content FROM atoms WHERE seq > ?", (before,))
    store.db.execute(trigger[0])
