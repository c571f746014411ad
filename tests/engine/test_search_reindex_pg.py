"""The PostgreSQL engine's reindex: an older database's entries get stemmed tsvectors with their concepts, in
resumable batches under `--migrate`, and no server serves a database whose reindex is under way."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from mnemo_tui.engine import fts
from mnemo_tui.engine.postgres import migrations as postgres
from mnemo_tui.engine.postgres import search as pg_search
from mnemo_tui.engine.postgres.migrations import migrate
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.errors import LocalStateError
from mnemo_tui.values.search import SearchQuery

ENTRIES = 13


def older_database(url: str) -> None:
    """A database at schema 4 (the last before stems), its entries' tsvectors made by that day's rule."""
    assert migrate(url, allowed=True, upto=4) == 4
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO buckets(kind, owner) VALUES ('own', 'alice')")
        for i in range(ENTRIES):
            atom = f"00000000-0000-4000-8000-{i:012d}"
            conn.execute(
                "INSERT INTO atoms(atom_id, bucket, domain, created_at, content, concepts, principal, wire, search) "
                "VALUES (%s, 1, 'ops', %s, %s, %s, 'alice', %s, %s::tsvector)",
                (
                    atom,
                    1000 + i,
                    f"entry {i} deploys the service",
                    '["rollout"]' if i % 2 else "[]",
                    f'{{"atom_id":"{atom}"}}',
                    f"'b1xentry':1 'b1x{i}':2 'b1xdeploys':3 'b1xthe':4 'b1xservice':5",
                ),
            )


def hits(url: str, query: str) -> int:
    store = PgStore(url)
    try:
        return len(store.search("alice", SearchQuery(query=query, top_k=500)))
    finally:
        store.close()


def test_an_older_database_is_reindexed_by_migrate_and_refused_without_it(pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.empty())
    older_database(url)
    with pytest.raises(LocalStateError, match="--migrate"):
        PgStore(url)
    PgStore(url, migrate_schema=True).close()
    assert hits(url, "deploy") == ENTRIES
    assert hits(url, "rollouts") == ENTRIES // 2
    with psycopg.connect(url) as conn:  # the GIN index is back once the reindex is done
        assert conn.execute("SELECT to_regclass('atoms_search')").fetchone() == ("atoms_search",)


def test_a_reindex_stopped_midway_goes_on_and_until_then_no_server_serves(
    pg_databases: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_databases.cluster.url(pg_databases.empty())
    older_database(url)
    monkeypatch.setattr(fts, "REINDEX_BATCH", 4)
    real, made = pg_search.vector, []

    def vector_then_stop(*args: Any) -> str:
        made.append(args)
        if len(made) == 9:
            raise KeyboardInterrupt  # the migrating server stopped inside its third batch
        return real(*args)

    monkeypatch.setattr(postgres, "vector", vector_then_stop)
    with pytest.raises(KeyboardInterrupt):
        migrate(url, allowed=True)
    monkeypatch.setattr(postgres, "vector", real)
    with psycopg.connect(url) as conn:
        assert fts.pending(postgres.PgConnection(conn)) == (8, ENTRIES)  # two batches kept
    postgres._MIGRATED.discard(url)
    with pytest.raises(LocalStateError, match="being rebuilt"):
        PgStore(url)
    PgStore(url, migrate_schema=True).close()
    assert hits(url, "deploy") == ENTRIES
