"""Every connection string libpq reads selects PostgreSQL (issue 41): multi-host URLs with target_session_attrs,
sslmode and the other parameters, a socket directory as host, `key=value` pairs; the shown identity lists every
host and never a password. The prepare setting, and a write whose COMMIT lost its connection."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.dburl import database_identity
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.errors import FateUnknown, ValidationError
from mnemo_tui.server.app import create_app
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support import pg
from tests.support.cli import CliResult
from tests.support.wire import refusing_port, served_store


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://mnemo:pw@127.0.0.1:5432/db", "postgresql://mnemo@127.0.0.1:5432/db"),
        ("postgres://mnemo@db.internal/team", "postgresql://mnemo@db.internal:5432/team"),
        (
            "postgresql://mnemo:pw@h1:5432,h2:5433/db?target_session_attrs=read-write&sslmode=require&password=pw",
            "postgresql://mnemo@h1:5432,h2:5433/db",
        ),
        ("postgresql://mnemo@h1,h2:6000/db", "postgresql://mnemo@h1:5432,h2:6000/db"),
        ("postgresql://mnemo@%2Fvar%2Frun%2Fpostgresql/db", "postgresql://mnemo@%2Fvar%2Frun%2Fpostgresql:5432/db"),
        ("postgresql:///db?host=/tmp/s&port=6432&user=u", "postgresql://u@%2Ftmp%2Fs:6432/db"),
        ("host=h1,h2 port=1,2 user=u password=pw dbname=d", "postgresql://u@h1:1,h2:2/d"),
        ("postgresql://mnemo:pw@[::1]:6000/x", "postgresql://mnemo@[::1]:6000/x"),
        ("postgresql://mnemo:pw@h/", "postgresql://mnemo@h:5432/mnemo"),
    ],
)
def test_the_shown_identity_lists_every_host_and_never_the_password(url: str, shown: str) -> None:
    assert database_identity(url) == shown


@pytest.mark.parametrize(
    "url",
    ["", "mydb.sqlite", "postgresql://u:se/cret@h/db", "postgresql://u@h:0/db", "postgresql://u@h/db?nosuch=1"],
)
def test_what_libpq_does_not_read_is_refused_without_its_text(url: str) -> None:
    with pytest.raises(ValidationError, match="not one libpq reads") as caught:
        database_identity(url)
    assert "cret" not in str(caught.value)


@contextmanager
def dead_host() -> Iterator[int]:
    with refusing_port() as sock:
        yield int(sock.getsockname()[1])


def test_a_multi_host_url_a_socket_directory_and_parameters_all_connect(pg_databases: Any) -> None:
    cluster: pg.Cluster = pg_databases.cluster
    name = pg_databases.create()
    secret = pg.PASSWORD
    with dead_host() as dead:
        multi = (
            f"postgresql://mnemo:{secret}@127.0.0.1:{dead},127.0.0.1:{cluster.port}/{name}"
            "?target_session_attrs=read-write&sslmode=disable&connect_timeout=5&application_name=mnemo-test"
        )
        store = PgStore(multi)
        try:
            written = store.write("alice", WriteRequest(content="through the second host", domain="d"))
            assert store.identity == f"postgresql://mnemo@127.0.0.1:{dead},127.0.0.1:{cluster.port}/{name}"
        finally:
            store.close()
    # The cluster's socket directory as host (local connections are trusted: no password).
    socket_url = f"postgresql://mnemo@{quote(str(cluster.folder), safe='')}:{cluster.port}/{name}"
    store = PgStore(socket_url)
    try:
        assert [e.atom_id for e in store.recent("alice", RecentQuery()).items] == [written.atom_id]
    finally:
        store.close()


def test_statements_are_prepared_only_without_a_pooler(pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.create())
    for pooled, expected in ((True, 0), (False, 1)):
        store = PgStore(url, pooled=pooled)
        try:
            for _ in range(8):  # past psycopg's threshold of 5
                store.recent("alice", RecentQuery())
            with store.reading() as db:  # the pool's one connection (one thread, one block at a time)
                count = db.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
            assert min(count, 1) == expected
        finally:
            store.close()


def test_the_pooler_setting_is_checked(cli: Callable[..., CliResult], pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.create())
    bad = cli("serve", "--database", url, "--port", "0", "--database-pooler", "session")
    assert bad.code == 2 and "--database-pooler must be transaction or none" in bad.stderr
    embedded = cli("serve", "--port", "0", "--database-pooler", "none")
    assert embedded.code == 2 and "is for a PostgreSQL database" in embedded.stderr


def test_a_connection_lost_at_commit_is_a_write_of_unknown_fate_never_retried(pg_databases: Any) -> None:
    cluster: pg.Cluster = pg_databases.cluster
    name = pg_databases.create()
    url = cluster.url(name)

    class LostAtCommit(PgStore):
        @contextmanager
        def _limited(self, conn: psycopg.Connection[Any], *, write: bool = True) -> Iterator[None]:
            with super()._limited(conn, write=write):
                yield
                if self._writes:  # the write's statements are done; its COMMIT meets a closed connection
                    with psycopg.connect(cluster.admin_url(name), autocommit=True) as admin:
                        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))

    store = LostAtCommit(url)
    try:
        with pytest.raises(FateUnknown, match="may or may not be stored") as caught:
            store.write("alice", WriteRequest(content="fate unknown", domain="d"))
        envelope = caught.value.envelope()
        assert (caught.value.status, envelope["retryable"]) == (503, False)
        assert envelope["details"] == {"reason": "commit_unknown"}
    finally:
        store.close()
    plain = PgStore(url)
    key = plain.create_key("alice")[1]
    plain.close()

    # Through `mnemo serve`: the client reports it as FateUnknown and never sends the write again.
    class Served:
        def app(self, workers: int) -> Any:
            return create_app(opener=partial(LostAtCommit, url), workers=workers)

    sleeps: list[float] = []
    with served_store(Served()) as server:
        client = RemoteBackend(server.url, key, sleep=sleeps.append)
        try:
            with pytest.raises(FateUnknown, match="may or may not be stored"):
                client.write(WriteRequest(content="fate unknown, served", domain="d"))
        finally:
            client.close()
    assert sleeps == []  # not retried
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM atoms WHERE content LIKE 'fate unknown%%'").fetchone() == (0,)
