"""The PostgreSQL engine's own promises: its schema's life (init, --migrate under a lock, newer refused), the
statement time limit, full-text search's quoting, and a URL's password never shown anywhere."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mnemo_tui.engine.postgres import schema as pg_schema
from mnemo_tui.engine.postgres.migrations import migrate
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.errors import LocalStateError, Timeout, Unavailable
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support import pg
from tests.support.cli import CliResult


def _version(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version FROM mnemo_schema").fetchone()
        assert row is not None
        return int(row[0])


def test_an_empty_database_is_initialized_on_first_use(pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.empty())
    store = PgStore(url)
    try:
        written = store.write("alice", WriteRequest(content="first words", domain="ops"))
        assert [e.atom_id for e in store.recent("alice", _query()).items] == [written.atom_id]
        assert store.identity == url.replace(":" + pg.PASSWORD, "")
    finally:
        store.close()
    assert _version(url) == pg_schema.LATEST


def _query() -> Any:
    from mnemo_tui.values.model import RecentQuery

    return RecentQuery(limit=10)


def test_an_older_schema_needs_migrate_and_two_servers_migrating_at_once_both_start(pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.empty())
    assert migrate(url, allowed=True, upto=1) == 1
    with psycopg.connect(url, autocommit=True) as conn:  # an entry written by the older mnemo
        conn.execute("INSERT INTO buckets(kind, owner) VALUES ('own', 'alice')")
        conn.execute(
            "INSERT INTO atoms(atom_id, bucket, domain, created_at, content, concepts, principal, wire) "
            "VALUES ('00000000-0000-4000-8000-000000000001', 1, 'ops', 5, 'older words', '[]', 'alice', "
            '\'{"atom_id":"00000000-0000-4000-8000-000000000001"}\')'
        )
    with pytest.raises(LocalStateError, match="--migrate"):
        PgStore(url)
    # Two servers started with --migrate at once: one migrates under the lock, the other finds it done.
    found: list[int | BaseException] = []

    def start() -> None:
        try:
            found.append(migrate(url, allowed=True))
        except BaseException as exc:  # noqa: BLE001 - reported below
            found.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert found == [pg_schema.LATEST, pg_schema.LATEST]
    store = PgStore(url)
    try:  # the migration indexed what the older schema held
        hits = store.search("alice", SearchQuery(query="older"))
        assert [h.entry.atom_id for h in hits] == ["00000000-0000-4000-8000-000000000001"]
    finally:
        store.close()


def test_a_newer_schema_is_refused(pg_databases: Any, cli: Callable[..., CliResult]) -> None:
    url = pg_databases.cluster.url(pg_databases.create())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE mnemo_schema SET version = 99")
    with pytest.raises(LocalStateError, match="newer mnemo"):
        migrate(url, allowed=True)
    result = cli("--database", url, "recent")
    assert result.code == 6 and "newer mnemo" in result.stderr and pg.PASSWORD not in result.stderr


@pytest.mark.parametrize("pooled", [True, False], ids=["pooler", "own-sessions"])
def test_every_statement_runs_under_the_time_limit(pg_databases: Any, pooled: bool) -> None:
    store = PgStore(pg_databases.cluster.url(pg_databases.create()), pooled=pooled)
    try:
        with pytest.raises(Timeout) as caught, store.time_limit(0.2), store.reading() as db:
            db.execute("SELECT pg_sleep(5)")
        assert caught.value.details == {"reason": "deadline", "limit_seconds": 0.2}
        with pytest.raises(Timeout), store.time_limit(0.2), store.transaction() as db:
            db.execute("SELECT pg_sleep(5)")
        with pytest.raises(Timeout), store.time_limit(0.2):  # a page's one statement
            store.fetch_all("SELECT pg_sleep(5)", ())
        assert store.fetch_all("SELECT 1 FROM pg_sleep(0.3)", ()) == [(1,)]  # rolled back, the limit gone
        with store.reading() as db:  # the limit went with the block
            assert db.execute("SELECT 1 FROM pg_sleep(0.3)").fetchone() == (1,)
    finally:
        store.close()


def test_hostile_search_text_is_words_never_syntax(pg_databases: Any) -> None:
    store = PgStore(pg_databases.cluster.url(pg_databases.create()))
    try:
        target = store.write("alice", WriteRequest(content="it's a back\\slash & pipe | story", domain="d")).atom_id
        store.write("bob", WriteRequest(content="story of bob", domain="d"))
        for query in ["it's", "back\\slash", "& | ! <-> :*", "'story'", "story:*", "(story", "STORY"]:
            hits = store.search("alice", SearchQuery(query=query))
            assert [h.entry.atom_id for h in hits] in ([target], []), query
        assert [h.entry.atom_id for h in store.search("alice", SearchQuery(query="story"))] == [target]
    finally:
        store.close()


def test_a_password_never_shows_in_output_errors_logs_or_watermarks(
    pg_databases: Any, cli: Callable[..., CliResult], isolated_home: Path
) -> None:
    name = pg_databases.create()
    url = pg_databases.cluster.url(name)
    secret = pg.PASSWORD
    shown: list[str] = []
    for args in (
        ("status",),
        ("status", "--format", "json"),
        ("write", "one entry"),
        ("catchup",),
        ("keys", "list"),
    ):
        result = cli("--database", url, *args)
        assert result.code == 0, result.stderr
        shown += [result.stdout, result.stderr]
    wrong = pg_databases.cluster.url(name, password="not-" + secret)
    refused = cli("--database", wrong, "recent")
    assert refused.code == 5 and "password authentication failed" in refused.stderr
    shown += [refused.stdout, refused.stderr]
    down = cli("--database", f"postgresql://mnemo:{secret}@127.0.0.1:1/{name}", "recent")
    assert down.code == 5
    shown += [down.stdout, down.stderr]
    both = cli("--database", url, "--store", str(isolated_home / "x.db"), "recent")
    assert both.code == 2 and "choose one" in both.stderr
    shown += [both.stdout, both.stderr]
    with_endpoint = cli("--database", url, "--endpoint", "http://127.0.0.1:1", "recent")
    assert with_endpoint.code == 2
    shown += [with_endpoint.stderr]
    debug = cli("--debug", "--database", f"postgresql://mnemo:{secret}@127.0.0.1:1/{name}", "recent")
    shown += [debug.stdout, debug.stderr]
    assert all(secret not in text for text in shown), [t for t in shown if secret in t]
    assert "postgresql://mnemo@127.0.0.1" in shown[0]
    for path in isolated_home.rglob("*"):  # the watermark and every other file mnemo keeps
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path

    from tests.support.serve import start_serve

    served = start_serve(isolated_home, "--database", url)
    import httpx

    assert httpx.get(served.url + "/health", timeout=10).status_code == 200
    code, log = served.stop()
    assert code == 0 and "database postgresql://mnemo@127.0.0.1" in log and secret not in log


def test_a_database_unreachable_at_start_is_a_clear_error(pg_databases: Any) -> None:
    with pytest.raises(Unavailable, match=r"cannot be reached|unavailable") as caught:
        PgStore(f"postgresql://mnemo:{pg.PASSWORD}@127.0.0.1:1/none")
    assert pg.PASSWORD not in str(caught.value)
