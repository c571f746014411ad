"""Servers started together on an empty PostgreSQL database (issue 50): the schema is created once, under the
migration lock, and every one of them starts; an older schema is still refused without --migrate."""

from __future__ import annotations

import multiprocessing
import queue
from typing import Any

import psycopg
import pytest

from mnemo_tui.engine.postgres import schema as pg_schema
from mnemo_tui.engine.postgres.migrations import migrate
from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.errors import LocalStateError, Unavailable
from tests.support import pg

PROCESSES = 3
ROUNDS = 10  # before the fix one opening in about three failed: ten rounds of three never all passed


def _open_each(urls: list[str], barrier: Any, answers: Any) -> None:
    """One process opening a store on each database in turn, all processes at the same moment (the barrier)."""
    for url in urls:
        try:
            barrier.wait(timeout=60)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            answers.put(f"barrier: {exc!r}")
            return
        try:
            store = PgStore(url)
            store.close()
            answers.put("ok")
        except Exception as exc:  # noqa: BLE001 - reported to the test
            answers.put(f"{type(exc).__name__}: {exc}")


def test_stores_opened_together_on_empty_databases_all_start(pg_databases: Any) -> None:
    urls = [pg_databases.cluster.url(pg_databases.empty()) for _ in range(ROUNDS)]
    spawn = multiprocessing.get_context("spawn")  # the test process holds threads and pools: no fork
    barrier = spawn.Barrier(PROCESSES)
    answers = spawn.Queue()
    workers = [spawn.Process(target=_open_each, args=(urls, barrier, answers)) for _ in range(PROCESSES)]
    for w in workers:
        w.start()
    found: list[str] = []
    try:
        for _ in range(PROCESSES * ROUNDS):
            found.append(answers.get(timeout=120))
    except queue.Empty:
        pass
    finally:
        for w in workers:
            w.join(timeout=60)
            if w.is_alive():
                w.kill()
    assert found == ["ok"] * (PROCESSES * ROUNDS)
    for url in urls:
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*), max(version) FROM mnemo_schema").fetchone() == (1, pg_schema.LATEST)
        pg_databases.drop(url.rsplit("/", 1)[1])


def test_an_older_schema_is_still_refused_without_migrate(pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.empty())
    assert migrate(url, allowed=True, upto=1) == 1
    with pytest.raises(LocalStateError, match="--migrate"):
        migrate(url, allowed=False)


def test_a_database_that_cannot_be_opened_says_why_without_the_password(pg_databases: Any) -> None:
    url = pg_databases.cluster.url(pg_databases.empty())
    with psycopg.connect(url, autocommit=True) as conn:  # a table in the way of the first migration
        conn.execute("CREATE TABLE mnemo_schema (release integer)")
    with pytest.raises(Unavailable) as raised:
        PgStore(url)
    text = str(raised.value)
    assert "cannot be opened" in text and 'column "version" does not exist' in text
    assert pg.PASSWORD not in text
