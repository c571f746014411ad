"""The one migration runner (mnemo_tui/migrations.py) and the three databases it upgrades: from a blank database
and from every older schema, to the same schema as a new one, the recorded versions read as they were written."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mnemo_tui.engine.postgres import schema as pg_schema
from mnemo_tui.engine.postgres.migrations import migrate as pg_migrate
from mnemo_tui.engine.sqlite import schema
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import LocalStateError
from mnemo_tui.migrations import Migrations
from mnemo_tui.sqlitefile import immediate, set_user_version, user_version
from mnemo_tui.state import statedb
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest


def _registry(applied: list[int]) -> Migrations[sqlite3.Connection]:
    steps: Migrations[sqlite3.Connection] = Migrations()

    @steps.step(1, "one")
    def one(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE one (x INTEGER)")
        applied.append(1)

    @steps.step(2, "two")
    def two(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE two (x INTEGER)")
        applied.append(2)

    return steps


def _run(steps: Migrations[sqlite3.Connection], db: sqlite3.Connection, **kw: Any) -> int:
    return steps.run(db, read=user_version, record=set_user_version, transaction=lambda: immediate(db), **kw)


def test_the_runner_applies_each_step_once_in_order_and_records_it() -> None:
    applied: list[int] = []
    steps = _registry(applied)
    db = sqlite3.connect(":memory:", isolation_level=None)
    assert [number for number, _, _ in steps] == [1, 2] and steps.latest == 2
    assert _run(steps, db, upto=1) == 1 and user_version(db) == 1
    assert _run(steps, db) == 2 and user_version(db) == 2
    assert _run(steps, db) == 2
    assert applied == [1, 2]


def test_a_step_refused_inside_its_transaction_leaves_the_database_as_it_was() -> None:
    steps = _registry([])
    db = sqlite3.connect(":memory:", isolation_level=None)

    def admit(version: int, number: int) -> None:
        if number == 2:
            raise LocalStateError("not allowed")

    with pytest.raises(LocalStateError):
        _run(steps, db, admit=admit)
    assert user_version(db) == 1
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master ORDER BY name")] == ["one"]


def test_steps_registered_out_of_order_are_refused() -> None:
    steps: Migrations[object] = Migrations()
    with pytest.raises(AssertionError):
        steps.step(2, "two")(lambda db: None)


def _sqlite_schema(path: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(path)
    try:
        return sorted((str(r[0]), str(r[1])) for r in db.execute("SELECT name, coalesce(sql, '') FROM sqlite_master"))
    finally:
        db.close()


@pytest.mark.parametrize("older", range(1, schema.LATEST + 1))
def test_a_store_of_every_older_schema_opens_upgraded_to_the_schema_of_a_new_one(tmp_path: Path, older: int) -> None:
    blank = tmp_path / "blank.db"
    Store(blank).close()
    path = tmp_path / "older.db"
    db = sqlite3.connect(path, isolation_level=None)
    assert schema.migrate(db, upto=older) == older and user_version(db) == older  # what an older mnemo left
    db.close()
    store = Store(path)
    try:
        store.write("alice", WriteRequest("after the upgrade"))
        assert [e.content for e in store.recent("alice", RecentQuery()).items] == ["after the upgrade"]
    finally:
        store.close()
    assert _sqlite_schema(path) == _sqlite_schema(blank)
    assert user_version(sqlite3.connect(path)) == schema.LATEST


def _state_schema(path: Path) -> list[tuple[str, str]]:
    return _sqlite_schema(path)


def test_the_state_database_is_made_from_blank_and_upgraded_from_version_one(tmp_path: Path) -> None:
    StateDB(tmp_path / "blank.db").close()
    old = tmp_path / "old.db"
    db = sqlite3.connect(old, isolation_level=None)
    assert _run_state(db, upto=1) == 1  # what mnemo made before runs (version 1)
    assert "runs" not in {name for name, _ in _state_schema(old)}
    db.close()
    StateDB(old).close()
    assert _state_schema(old) == _state_schema(tmp_path / "blank.db")
    assert user_version(sqlite3.connect(old)) == statedb.MIGRATIONS.latest == 2


def _run_state(db: sqlite3.Connection, upto: int) -> int:
    return statedb.MIGRATIONS.run(
        db, read=user_version, record=set_user_version, transaction=lambda: immediate(db), upto=upto
    )


def test_a_state_database_of_a_newer_mnemo_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    StateDB(path).close()
    db = sqlite3.connect(path)
    set_user_version(db, statedb.MIGRATIONS.latest + 1)
    db.commit()
    db.close()
    with pytest.raises(LocalStateError, match="newer mnemo"):
        StateDB(path)


def _pg_schema(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() ORDER BY 1, 2"
        ).fetchall()
        indexes = conn.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2"
        ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in [*rows, *indexes]]


def test_a_postgresql_database_of_every_older_schema_migrates_to_the_schema_of_a_new_one(pg_databases: Any) -> None:
    blank = pg_databases.cluster.url(pg_databases.empty())
    assert pg_migrate(blank, allowed=False) == pg_schema.LATEST
    for older in range(1, pg_schema.LATEST):
        url = pg_databases.cluster.url(pg_databases.empty())
        assert pg_migrate(url, allowed=True, upto=older) == older
        with pytest.raises(LocalStateError, match="--migrate"):
            pg_migrate(url, allowed=False)
        assert pg_migrate(url, allowed=True) == pg_schema.LATEST
        assert _pg_schema(url) == _pg_schema(blank), f"from schema {older}"
