"""A damaged state database or config.toml stops mnemo with exit 6, the file's name and the way out: never a silent reset."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import LocalStateError
from mnemo_tui.state.config import resolve
from mnemo_tui.values.writes import WriteRequest
from tests.support.reliability import Target, integrity, run_cli


def _home_with_a_watermark(tmp_path: Path) -> tuple[Target, dict[str, str], Path]:
    """A store with entries, and a state database holding a real watermark for them."""
    store_path = tmp_path / "store.db"
    store = Store(store_path)
    for i in range(30):
        store.write("alice", WriteRequest(content=f"entry {i}"))
    store.close()
    target = Target("embedded", store_path)
    env = target.env(tmp_path / "home")
    proc = run_cli(env, "catchup", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["watermark"]["after"] is not None
    state = tmp_path / "home" / "state.db"
    assert integrity(state) == "ok"
    return target, env, state


def _assert_refused(env: dict[str, str], path: Path, *argv: str) -> None:
    before = path.read_bytes()
    proc = run_cli(env, *argv)
    assert proc.returncode == 6, (argv, len(before), proc.returncode, proc.stdout, proc.stderr)
    assert str(path) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
    assert any(way in proc.stderr for way in ("move it aside", "fix", "without --resume")), proc.stderr  # the way out
    assert "atom_id" not in proc.stdout  # nothing was delivered
    assert path.read_bytes() == before, "the damaged file was changed: that is how watermarks get silently reset"


def _truncations(data: bytes) -> list[int]:
    page = 4096
    cuts = {0, 1, 50, 99, 100, page // 2, page, page + 1, len(data) // 2}
    cuts |= {n * page for n in range(1, len(data) // page)}
    return sorted(c for c in cuts if c < len(data) - page or c < page)


def test_a_truncated_state_database_stops_catchup_with_exit_6_and_keeps_the_file(tmp_path: Path) -> None:
    _, env, state = _home_with_a_watermark(tmp_path)
    good = state.read_bytes()
    for cut in _truncations(good):
        state.write_bytes(good[:cut])
        for leftover in (state.with_name("state.db-wal"), state.with_name("state.db-shm")):
            leftover.unlink(missing_ok=True)
        _assert_refused(env, state, "catchup", "--format", "json")
    # The intact file still holds the watermark: nothing new, nothing repeated.
    state.write_bytes(good)
    proc = run_cli(env, "catchup", "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["items"] == []


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(lambda: random.Random(6).randbytes(20_480), id="random-bytes"),
        pytest.param(lambda: b"watermarks: please keep\n" * 100, id="text"),
        pytest.param(lambda: b"SQLite format 3\x00" + b"\xff" * 4080, id="bad-header"),
    ],
)
def test_a_garbage_state_database_stops_every_stateful_command_with_exit_6(
    tmp_path: Path, garbage: Callable[[], bytes]
) -> None:
    _, env, state = _home_with_a_watermark(tmp_path)
    state.write_bytes(garbage())
    for leftover in (state.with_name("state.db-wal"), state.with_name("state.db-shm")):
        leftover.unlink(missing_ok=True)
    _assert_refused(env, state, "catchup")
    _assert_refused(env, state, "catchup", "--resume", "--format", "ndjson")
    # A read that keeps no state is not held hostage by the state file.
    assert run_cli(env, "recent", "--format", "json").returncode == 0


def test_a_damaged_watermark_row_is_exit_6_not_a_crash_or_a_reset(tmp_path: Path) -> None:
    _, env, state = _home_with_a_watermark(tmp_path)
    db = sqlite3.connect(state)
    db.execute("UPDATE watermarks SET boundary_ids = 'not json ['")
    db.commit()
    db.close()
    _assert_refused(env, state, "catchup", "--format", "json")


def test_a_damaged_checkpoint_is_exit_6_on_resume(tmp_path: Path) -> None:
    _, env, state = _home_with_a_watermark(tmp_path)
    db = sqlite3.connect(state)
    db.execute(
        "INSERT INTO checkpoints(backend, principal, consumer, scope, walk_id, state, updated_at) "
        "SELECT backend, principal, consumer, scope, 'w', '{\"walk_id\": 1', 0 FROM watermarks"
    )
    db.commit()
    db.close()
    _assert_refused(env, state, "catchup", "--resume")


def _config_text(tmp_path: Path) -> str:
    return (
        '# my profiles\ndefault_profile = "work"\n\n'
        f'[profiles.work]\nstore = "{tmp_path / "work.db"}"\nstate = "{tmp_path / "work-state.db"}"\n'
        'principal = "alice"\nconsumer = "build-bot"\n\n'
        f'[profiles.home]\nstore = "{tmp_path / "home.db"}"\n'
    )


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"\x00\xff\xfe garbage \x80", id="binary"),
        pytest.param(b"[profiles.work\nstore = ", id="broken-toml"),
        pytest.param(b'profiles = "not a table"\n', id="wrong-shape"),
        pytest.param(b"[profiles.work]\nstore = 42\n", id="wrong-type"),
    ],
)
def test_a_garbage_config_toml_is_exit_6_naming_the_file(tmp_path: Path, content: bytes) -> None:
    home = tmp_path / "home"
    config = home / "config.toml"
    config.write_bytes(content)
    env = Target("embedded", tmp_path / "store.db").env(home)
    env.pop("MNEMO_STORE")
    for argv in (("catchup",), ("recent",), ("write", "hello")):
        _assert_refused(env, config, *argv)


def test_every_truncation_of_config_toml_is_refused_with_its_name_or_read_as_written(tmp_path: Path) -> None:
    """Cut the file at every byte: each prefix is either a valid config, read as such, or a named exit-6 error."""
    home = tmp_path / "home"
    config = home / "config.toml"
    text = _config_text(tmp_path).encode()
    outcomes = {"refused": 0, "read": 0}
    for cut in range(len(text) + 1):
        config.write_bytes(text[:cut])
        try:
            settings = resolve(env={"MNEMO_HOME": str(home)})
        except LocalStateError as exc:
            assert str(config) in exc.message
            outcomes["refused"] += 1
            continue
        outcomes["read"] += 1
        # Whatever was read is what the prefix says, nothing more and nothing less.
        store_line = f'store = "{tmp_path / "work.db"}"'.encode()
        if settings.profile == "work":
            complete = store_line in text[:cut]
            assert settings.store_path is not None
            assert Path(settings.store_path) == (tmp_path / "work.db" if complete else home / "store.db")
        else:
            assert settings.profile is None
            assert b'default_profile = "work"' not in text[:cut]
    assert outcomes["refused"] > 0 and outcomes["read"] > 0
    # The same through the CLI for a few cuts in the middle of the profile.
    env = Target("embedded", tmp_path / "store.db").env(home)
    env.pop("MNEMO_STORE")
    for cut in (text.index(b"[profiles.work") + 5, text.index(b"store =") + 12):
        config.write_bytes(text[:cut])
        _assert_refused(env, config, "catchup")


def test_a_truncated_store_is_exit_6_never_a_fresh_empty_store(tmp_path: Path) -> None:
    target, env, _ = _home_with_a_watermark(tmp_path)
    good = target.store.read_bytes()
    for cut in (0, 1, 100, 511):
        target.store.write_bytes(good[:cut])
        for leftover in (target.store.with_name("store.db-wal"), target.store.with_name("store.db-shm")):
            leftover.unlink(missing_ok=True)
        _assert_refused(env, target.store, "recent", "--format", "json")
        _assert_refused(env, target.store, "write", "into the void")


@pytest.mark.slow
def test_stores_and_state_databases_created_at_once_by_many_processes_are_one_file_each(tmp_path: Path) -> None:
    """Creation is all or nothing: racing first opens never leave an empty file or replace another's."""
    import subprocess

    from tests.support.reliability import MNEMO

    env = Target("embedded", tmp_path / "fresh" / "store.db").env(tmp_path / "home")
    (tmp_path / "fresh").mkdir()  # a named store's folder must exist (a typo never makes one)
    # Six writers race to create the store (a read never creates one), then six consumers (one pass
    # of a consumer's scope runs at a time) race to create the state database.
    for command in (["write", "first"], ["catchup", "--format", "json"]):
        procs = [
            subprocess.Popen(
                [MNEMO, *command, *(["--consumer", f"c{i}"] if command[0] == "catchup" else [])],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for i in range(6)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    assert integrity(tmp_path / "fresh" / "store.db") == "ok"
    assert integrity(tmp_path / "home" / "state.db") == "ok"
    leftovers = [p.name for p in (tmp_path / "fresh").iterdir()] + [p.name for p in (tmp_path / "home").iterdir()]
    assert not [name for name in leftovers if name.endswith(".tmp")]
    assert oct((tmp_path / "fresh" / "store.db").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "home" / "state.db").stat().st_mode & 0o777) == "0o600"


def test_opening_a_second_connection_never_blinds_the_first_to_other_processes(tmp_path: Path) -> None:
    """Opening a store or state file again in-process must not drop this process's SQLite locks.

    (Closing any descriptor of a database file drops every POSIX lock the process holds on it; a
    writer in another process then thinks it is the last one, checkpoints and deletes the WAL, and
    the connections still open here read a stale snapshot forever.)
    """
    import subprocess

    from mnemo_tui.state.statedb import StateDB, StateKey
    from tests.support.reliability import PYTHON

    path = tmp_path / "store.db"
    reader = Store(path)
    reader.write("alice", WriteRequest(content="first"))
    state = StateDB(tmp_path / "state.db")
    for _ in range(3):
        Store(path).close()  # e.g. a server opening one connection per worker thread
        StateDB(tmp_path / "state.db").close()
    script = (
        "import sys\nfrom mnemo_tui.engine.sqlite.store import Store\nfrom mnemo_tui.values.writes import WriteRequest\n"
        "from mnemo_tui.state.statedb import StateDB, StateKey\n"
        "s = Store(sys.argv[1])\ns.write('alice', WriteRequest(content='second'))\n"
        "s.bulk_insert([('alice', WriteRequest(content=f'bulk {i}'), 0) for i in range(40)])\ns.close()\n"
        "st = StateDB(sys.argv[2])\nst.commit(StateKey('b', 'p', 'c', None), 1, ('x',))\nst.close()\n"
    )
    for _ in range(2):
        subprocess.run([PYTHON, "-c", script, str(path), str(tmp_path / "state.db")], check=True)
    count = reader.db.execute("SELECT count(*) FROM atoms").fetchone()[0]
    assert count == 1 + 2 * 41, "this process's open connection no longer sees the other process's writes"
    assert state.load(StateKey("b", "p", "c", None)) is not None
    reader.close()
    state.close()
