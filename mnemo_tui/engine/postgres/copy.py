"""Provides `copy_store`: an embedded store moved into an empty PostgreSQL database, exactly."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from mnemo_tui.engine.postgres import schema
from mnemo_tui.engine.postgres.pools import PgConnection, failure
from mnemo_tui.engine.postgres.search import vector
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.errors import Conflict, Unavailable


def copy_store(source: Any, url: str) -> dict[str, int]:
    """Copy an embedded store (an open `Store`) into the PostgreSQL database at `url`, exactly.

    Ids, times, buckets and their clocks, rooms, members, invites, keys, the vault, supersession,
    feedback, remembered answers and the cursor secret move as they are, so cursors issued by the
    store continue on the database. The store is read in one snapshot; the database is written in
    one transaction (all or nothing). Returns the rows copied per table.

    Raises:
        Conflict: the database already holds data (nothing is written).
        Unavailable: the database cannot be reached.
    """
    target = PgStore(url)
    counts: dict[str, int] = {}
    try:
        with target._checkout() as conn, source.reading() as src:
            db = PgConnection(conn)
            for table in schema.HOLDS_DATA:
                if db.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
                    raise Conflict(
                        f"the database {target.identity} already holds data ({table}); "
                        "copy into an empty database (the copy never merges)"
                    )
            src.execute("BEGIN")  # one snapshot of the store for the whole copy
            try:
                with conn.transaction():
                    for key, value in src.execute("SELECT key, value FROM meta"):
                        db.execute(
                            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            (key, bytes(value)),
                        )
                    for table, columns in schema.COPIED:
                        extra = ", search" if table == "atoms" else ""
                        counts[table] = 0
                        with conn.cursor().copy(f"COPY {table} ({columns}{extra}) FROM STDIN") as out:
                            for row in src.execute(f"SELECT {columns} FROM {table}"):
                                # An older store may hold a NUL, which PostgreSQL's text cannot: U+FFFD instead.
                                values = [v.replace("\x00", "\ufffd") if isinstance(v, str) else v for v in row]
                                if table == "atoms":
                                    # bucket, content, concepts, in the store's language (its meta, copied above)
                                    values.append(vector(int(row[2]), str(row[5]), str(row[6]), source.language))
                                out.write_row(values)
                                counts[table] += 1
                    for table, column in (("buckets", "bucket"), ("atoms", "seq")):
                        db.execute(
                            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                            f"greatest((SELECT max({column}) FROM {table}), 1))"
                        )
            finally:
                src.execute("COMMIT")
    except (psycopg.Error, PoolTimeout) as exc:
        raise failure(url, exc) or Unavailable("the copy failed") from None
    finally:
        target.close()
    return counts
