"""Hostile hands (docs/security.md): bounded cost per request, no oracle, no poisoned state, honest failures."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sqlite3
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import MNEMO

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from mnemo_tui import files
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine import fts
from mnemo_tui.engine.base import LATEST_WRITE
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import Conflict, LocalStateError, Timeout, Unavailable, ValidationError
from mnemo_tui.server import app as server_app
from mnemo_tui.server import search_routes
from mnemo_tui.server.app import create_app
from mnemo_tui.server.middleware import loggable
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.wire import Canned, serving

KEY_SHAPED = "mk_live_" + "0" * 32


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[tuple[TestClient, Store, str]]:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    with TestClient(create_app(path, workers=2), raise_server_exceptions=False) as client:
        yield client, store, key
    store.close()


def post(client: TestClient, path: str, body: Any, key: str, **kw: Any) -> Any:
    return client.post("/api/v1" + path, json=body, headers={"X-Api-Key": key}, **kw)


# -- a request's cost is bounded -----------------------------------------------------------------


def test_repeated_words_make_one_phrase_and_no_query_holds_more_than_the_cap() -> None:
    assert fts.match(3, ["a"] * 2500) == fts.match(3, ["a"]) == '"b3xa"'
    many = fts.match(3, [f"w{i}" for i in range(500)])
    assert many.count(" OR ") == fts.MAX_QUERY_WORDS - 1


def test_a_search_of_thousands_of_repeated_words_answers_as_one_word(store: Store) -> None:
    for i in range(50):
        store.write("alice", WriteRequest(content=f"a note {i} about a cache"))
    hits = store.search("alice", SearchQuery(query=" ".join(["a"] * 2500), top_k=500))
    assert len(hits) == 50


def test_a_statement_past_its_deadline_is_stopped_with_a_timeout(store: Store) -> None:
    store.bulk_insert([("alice", WriteRequest(content=f"entry {i}"), i + 1) for i in range(3000)])
    with pytest.raises(Timeout) as caught, store.time_limit(0.0):
        list(store.stream_wire("alice", RecentQuery()))
    assert caught.value.status == 503 and caught.value.retryable is False
    assert len([w for chunk in store.stream_wire("alice", RecentQuery()) for w in chunk]) == 3000  # no limit left


def test_the_server_stops_a_request_at_its_deadline_with_a_final_503(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    store.bulk_insert([("alice", WriteRequest(content=f"entry {i}"), i + 1) for i in range(3000)])
    with TestClient(create_app(path, workers=2, request_seconds=0.0), raise_server_exceptions=False) as client:
        answer = post(client, "/memory/read", {"query": "entry", "top_k": 500}, key)
    store.close()
    assert answer.status_code == 503 and answer.json()["retryable"] is False
    assert answer.json()["details"]["reason"] == "deadline"


def test_health_answers_while_every_database_thread_is_busy(tmp_path: Path) -> None:
    app = create_app(tmp_path / "served.db", workers=2)
    release = threading.Event()
    inside = threading.Semaphore(0)

    def hold(engine: Store) -> None:
        inside.release()
        release.wait(30)

    async def occupy() -> None:
        await asyncio.gather(*(app.state.pool.run(hold) for _ in range(2)))

    with TestClient(app, raise_server_exceptions=False) as client:
        holder = threading.Thread(target=asyncio.run, args=(occupy(),))
        holder.start()
        try:
            assert inside.acquire(timeout=20) and inside.acquire(timeout=20)  # both threads are held
            started = time.monotonic()
            answer = client.get("/api/v1/health")
            waited = time.monotonic() - started
        finally:
            release.set()
            holder.join(timeout=30)
    assert answer.status_code == 200 and answer.json()["database"] is True
    assert waited < 25  # it did not queue behind the two blocked threads (which hold for 30 s)


def _search_steps(root: Path, foreign: str, word: str) -> int:
    """The SQLite steps of one principal's search for `word`, in a store where another wrote `foreign`."""
    store = Store(root / "store.db")
    try:
        store.write("alice", WriteRequest(content="my own note"))
        store.bulk_insert([("bob", WriteRequest(content=f"{foreign} {i}"), i + 1) for i in range(3000)])
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        store.db.set_progress_handler(count, 1)
        assert store.search("alice", SearchQuery(query=word)) == []
        return steps[0]
    finally:
        store.close()


@pytest.mark.parametrize("word", ["zebra", "crossing", "qwerty"])
def test_a_search_does_the_same_work_whether_other_stores_hold_the_word_or_not(tmp_path: Path, word: str) -> None:
    # Counted in SQLite's own steps, not timed: the same for a word 3,000 foreign entries hold and for
    # one they do not, so no principal can learn from a search what another wrote.
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    present = _search_steps(tmp_path / "with", "zebra crossing qwerty number", word)
    absent = _search_steps(tmp_path / "without", "other words entirely", word)
    assert present == absent


def test_one_answer_is_bounded_and_refused_past_the_bound(
    wire: tuple[TestClient, Store, str], monkeypatch: Any
) -> None:
    client, store, key = wire
    monkeypatch.setattr(search_routes, "MAX_ANSWER", 100_000)
    for i in range(30):
        store.write("alice", WriteRequest(content=f"big {i}", metadata={"blob": "x" * 10_000}))
    fine = post(client, "/memory/read", {"query": "big", "top_k": 5}, key)
    assert fine.status_code == 200 and len(fine.json()["items"]) == 5
    batch = {"queries": [{"query": "big", "top_k": 30}, {"query": "big", "top_k": 30}]}
    refused = post(client, "/memory/read-batch", batch, key)
    assert refused.status_code == 400 and refused.json()["details"]["limit_bytes"] == 100_000


def _raw(port: int, head: bytes, wait: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(head)
        try:
            return sock.recv(65536)
        except TimeoutError:
            return b""


def test_a_made_up_key_is_refused_before_a_byte_of_the_body_is_read(tmp_path: Path) -> None:
    with serving(create_app(tmp_path / "served.db", workers=2)) as server:
        head = (
            f"POST /api/v1/memory/write HTTP/1.1\r\nHost: x\r\nX-Api-Key: {KEY_SHAPED}\r\n"
            "Content-Type: application/json\r\nContent-Length: 900000\r\n\r\n"
        ).encode()
        answer = _raw(server.port, head, 5)  # the body never comes
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_a_slow_body_is_cut_off_with_408(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(server_app, "BODY_SECONDS", 0.5)
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    store.close()
    with serving(create_app(path, workers=2)) as server:
        head = (
            f"POST /api/v1/memory/write HTTP/1.1\r\nHost: x\r\nX-Api-Key: {key}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"content":'
        ).encode()
        answer = _raw(server.port, head, 10)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"code":"REQUEST_TIMEOUT"' in answer


def test_bodies_in_flight_are_bounded(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(server_app, "BODIES_IN_FLIGHT", 1000)
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    with TestClient(create_app(path, workers=2), raise_server_exceptions=False) as client:
        answer = post(client, "/memory/write", {"content": "x" * 5000}, key)
        small = post(client, "/memory/write", {"content": "small"}, key)
    store.close()
    assert answer.status_code == 503 and answer.json()["retryable"] is True
    assert small.status_code == 200


# -- nothing leaks, nothing is forged ------------------------------------------------------------


def test_every_access_log_field_is_escaped(wire: tuple[TestClient, Store, str]) -> None:
    client, _store, key = wire
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("mnemo.access")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        client.get(
            '/api/v1/memory/x%0A1.2.3.4:1 "DELETE /api/v1/memory/atoms/x" 200 principal=alice',
            headers={"X-Api-Key": key},
        )
    finally:
        logger.removeHandler(handler)
    lines = [r.getMessage() for r in records]
    assert lines and all("\n" not in line and "\r" not in line for line in lines)
    assert all(line.count('"') == 2 for line in lines)  # only the log's own quotes around the request
    assert loggable("plain/path") == "plain/path" and "\n" not in loggable("a\nb\rc\x1b")


def test_a_file_written_whole_never_follows_a_planted_link(tmp_path: Path, monkeypatch: Any) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    planted = tmp_path / ".credentials.json.planted.tmp"
    planted.symlink_to(target)
    monkeypatch.setattr(files, "temporary_name", lambda path: planted)
    with pytest.raises(FileExistsError):
        files.write_atomic(tmp_path / "credentials.json", '{"k": "secret"}')
    assert target.read_text() == "untouched" and not (tmp_path / "credentials.json").exists()


def test_files_written_whole_are_private_and_complete(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.toml"
    files.write_atomic(path, "a = 1\n")
    files.write_atomic(path, "a = 2\n")
    assert path.read_text() == "a = 2\n" and path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]


# -- nothing stored is poisoned or lost from view ------------------------------------------------


def test_deleting_a_successor_makes_its_predecessor_the_live_tip_again(local: LocalBackend) -> None:
    first = local.write(WriteRequest(content="plan: ship on Friday")).atom_id
    second = local.write(WriteRequest(content="plan: ship on Monday", supersedes=(first,))).atom_id
    assert [e.atom_id for e in local.recent(RecentQuery()).items] == [second]
    assert local.delete(second) == 1
    assert [e.atom_id for e in local.recent(RecentQuery()).items] == [first]
    assert local.get(first).superseded_by is None
    assert [h.entry.atom_id for h in local.search(SearchQuery(query="plan"))] == [first]
    third = local.write(WriteRequest(content="plan: ship on Tuesday", supersedes=(first,))).atom_id
    assert [e.atom_id for e in local.recent(RecentQuery()).items] == [third]


def test_a_watermark_only_moves_forward_except_by_hand(state: StateDB) -> None:
    key = StateKey("b", "p", "c", None)
    state.commit(key, 2_000, ("x",))
    assert state.commit(key, 1_000, ("old",)).created_at == 2_000  # a late commit of an older pass
    assert state.load(key) is not None and state.load(key).boundary_ids == ("x",)  # type: ignore[union-attr]
    assert state.commit(key, 2_000, ("y",)).boundary_ids == ("x", "y")
    assert state.commit(key, 500, (), force=True).created_at == 500  # `watermark set`


def test_a_second_pass_of_the_same_consumer_and_scope_is_refused_while_the_first_runs(
    local: LocalBackend, state: StateDB
) -> None:
    for i in range(6):
        local.write(WriteRequest(content=f"entry {i}"))
    refusals: list[str] = []

    def emit(entries: list[Any]) -> None:
        try:
            CatchUp(local, state, limit=2).run(lambda e: None)
        except Conflict as exc:
            refusals.append(exc.message)
        CatchUp(local, state, limit=2, consumer="other").run(lambda e: None)  # another consumer runs freely

    first = CatchUp(local, state, limit=2).run(emit)
    assert first.delivered == 6 and len(refusals) == 3
    assert "another catchup of consumer 'default'" in refusals[0] and "is running (pid" in refusals[0]
    assert CatchUp(local, state).run(lambda e: None).delivered == 0  # the first one's claim was released


def _recorded_run(state: StateDB, key: StateKey, host: str, pid: int, beat_at: int) -> None:
    state.db.execute(
        "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)", (*key.row(), "old-run", host, pid, beat_at, beat_at)
    )


def test_a_pass_whose_process_died_is_taken_over(local: LocalBackend, state: StateDB) -> None:
    key = StateKey(local.identity, local.principal, "default", None)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that has exited (and been reaped)
    _recorded_run(state, key, socket.gethostname(), gone.pid, int(time.time() * 1e6))
    local.write(WriteRequest(content="after a crash"))
    assert CatchUp(local, state).run(lambda e: None).delivered == 1


def test_a_run_of_another_machine_holds_only_while_its_lease_is_fresh(local: LocalBackend, state: StateDB) -> None:
    key = StateKey(local.identity, local.principal, "default", None)
    now = int(time.time() * 1e6)
    _recorded_run(state, key, "another-container", 1, now)
    with pytest.raises(Conflict, match="on another-container"):
        CatchUp(local, state).run(lambda e: None)
    state.db.execute("UPDATE runs SET beat_at = ?", (now - 10 * 60 * 1_000_000,))  # ten minutes without a checkpoint
    assert CatchUp(local, state).run(lambda e: None).delivered == 0


def test_watermark_reset_clears_a_run_record_that_should_not_be_there(local: LocalBackend, state: StateDB) -> None:
    key = StateKey(local.identity, local.principal, "default", None)
    _recorded_run(state, key, "another-container", 1, int(time.time() * 1e6))
    state.reset(key)
    assert CatchUp(local, state).run(lambda e: None).pages == 1


def test_every_checkpoint_renews_the_run_lease(local: LocalBackend, state: StateDB) -> None:
    for i in range(5):
        local.write(WriteRequest(content=f"entry {i}"))
    beats: list[int] = []
    key = StateKey(local.identity, local.principal, "default", None)

    def emit(entries: list[Any]) -> None:
        beats.append(state.db.execute("SELECT beat_at FROM runs WHERE consumer = 'default'").fetchone()[0])

    CatchUp(local, state, limit=2).run(emit)
    assert len(beats) == 3 and beats == sorted(beats) and beats[0] < beats[-1]
    assert state.db.execute("SELECT count(*) FROM runs WHERE consumer = ?", (key.consumer,)).fetchone()[0] == 0


def test_a_writer_clock_at_the_end_of_time_can_never_make_a_store_unwritable(store: Store) -> None:
    end_of_time = 253_402_300_799_000_000  # 9999-12-31T23:59:59Z
    with pytest.raises(ValidationError, match="clock reads 9999-12-31"):
        store.bulk_insert([("alice", WriteRequest(content="from a wild clock"), end_of_time)])
    store.bulk_insert([("alice", WriteRequest(content="at the bound"), LATEST_WRITE)])
    later = [store.write("alice", WriteRequest(content=f"ordinary {i}")) for i in range(3)]
    times = [store.get("alice", w.atom_id).created_at for w in later]
    assert times == sorted(times) and times[0] == LATEST_WRITE + 1


def test_a_store_removed_under_the_server_stops_accepting(tmp_path: Path) -> None:
    path = tmp_path / "gone" / "served.db"
    path.parent.mkdir()
    store = Store(path)
    key = store.create_key("alice")[1]
    store.close()
    with TestClient(create_app(path, workers=2), raise_server_exceptions=False) as client:
        assert post(client, "/memory/write", {"content": "before"}, key).status_code == 200
        for leftover in path.parent.iterdir():
            leftover.unlink()
        path.parent.rmdir()
        write = post(client, "/memory/write", {"content": "after"}, key)
        health = client.get("/api/v1/health")
    assert write.status_code == 503 and "removed or replaced" in write.json()["message"]
    assert health.status_code == 503


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/memory/write", b'{"content": "x", "metadata": {"n": NaN}}'),
        ("/memory/write", b'{"content": "x", "metadata": {"n": Infinity}}'),
        ("/memory/read", b'{"query": "x", "min_relevance": NaN}'),
        ("/memory/write", b'{"content": "\\ud800"}'),
        ("/memory/recent", b'{"domain": "a\\udfff"}'),
        ("/vault/secrets", b'{"alias": "k", "context": "\\ud800", "sealed_secret_b64": "eA=="}'),
    ],
)
def test_json_that_cannot_be_stored_is_a_422_envelope(
    wire: tuple[TestClient, Store, str], path: str, raw: bytes
) -> None:
    client, store, key = wire
    answer = client.post("/api/v1" + path, content=raw, headers={"X-Api-Key": key, "Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["code"] == "VALIDATION_ERROR" and body["message"]
    assert store.recent("alice", RecentQuery()).items == []


def test_metadata_with_nan_is_refused_by_the_engine_too(store: Store) -> None:
    with pytest.raises(ValidationError, match="NaN or Infinity"):
        store.write("alice", WriteRequest(content="x", metadata={"n": float("nan")}))


# -- failures say what happened ------------------------------------------------------------------


def _run(home: Path, *args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.CompletedProcess[bytes]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    full.update({"MNEMO_HOME": str(home), "NO_COLOR": "1", **(env or {})})
    return subprocess.run([MNEMO, *args], capture_output=True, env=full, timeout=60, check=False, **kw)


def test_a_terminal_that_cannot_show_a_character_gets_an_escape_and_machines_get_utf8(isolated_home: Path) -> None:
    assert _run(isolated_home, "write", "deploy done \u2705").returncode == 0
    cp1252 = {"PYTHONIOENCODING": "cp1252"}
    table = _run(isolated_home, "recent", env=cp1252)
    assert table.returncode == 0 and b"\\u2705" in table.stdout and b"Traceback" not in table.stderr
    lines = _run(isolated_home, "recent", "--format", "ndjson", env=cp1252)
    assert lines.returncode == 0 and json.loads(lines.stdout.decode("utf-8"))["content"] == "deploy done \u2705"
    caught = _run(isolated_home, "catchup", env=cp1252)
    assert caught.returncode == 0 and b"\\u2705" in caught.stdout


@pytest.mark.parametrize("closed", ["stdout", "stderr"])
def test_a_closed_stream_never_turns_success_into_failure(isolated_home: Path, closed: str) -> None:
    fd = 1 if closed == "stdout" else 2
    shell = f'"{MNEMO}" write "kept" {fd}>&- && "{MNEMO}" recent {fd}>&- && "{MNEMO}" catchup {fd}>&-'
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    result = subprocess.run(["sh", "-c", shell], capture_output=True, env=env, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(_run(isolated_home, "recent", "--format", "json").stdout)["items"][0]["content"] == "kept"


@pytest.mark.parametrize("key", ["mk_live_\u00e9t\u00e9", "mk live with spaces", "\u2705"])
def test_a_malformed_api_key_is_exit_3_at_once_without_a_request(isolated_home: Path, key: str) -> None:
    canned = Canned()
    with serving(canned) as server:
        result = _run(isolated_home, "recent", env={"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key})
    assert result.returncode == 3 and b"malformed" in result.stderr and b"Traceback" not in result.stderr
    assert canned.seen == []


def test_white_space_around_a_key_is_stripped(isolated_home: Path, tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    store.write("alice", WriteRequest(content="hello"))
    store.close()
    with serving(create_app(path, workers=2)) as server:
        for padded in (f"{key}\n", f" {key}\r\n", f"\t{key} "):
            result = _run(
                isolated_home,
                "recent",
                "--format",
                "ndjson",
                env={"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": padded},
            )
            assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("endpoint", ["http://[::1/api", "http://host:99999/api/v1", "http://ho st/api/v1"])
def test_a_malformed_endpoint_is_exit_2(isolated_home: Path, endpoint: str) -> None:
    result = _run(isolated_home, "--endpoint", endpoint, "recent", env={"MNEMO_API_KEY": KEY_SHAPED})
    assert result.returncode == 2 and b"is not an http(s) URL" in result.stderr and b"internal" not in result.stderr


def test_an_overlong_overlap_is_exit_2_with_nothing_on_stdout(isolated_home: Path) -> None:
    result = _run(isolated_home, "catchup", "--overlap", "999999999999w", "--format", "json")
    assert result.returncode == 2 and result.stdout == b"" and b"--overlap" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_config_that_is_not_a_file_is_refused_at_once(isolated_home: Path, kind: str) -> None:
    config = isolated_home / "config.toml"
    if kind == "fifo":
        os.mkfifo(config)
    else:
        config.mkdir()
    result = _run(isolated_home, "recent")
    assert result.returncode == 6 and b"not a regular file" in result.stderr


def test_a_key_nobody_saw_does_not_stay_active(isolated_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            [MNEMO, "keys", "create", "alice"], stdout=full, stderr=subprocess.PIPE, env=env, timeout=60, check=False
        )
    assert result.returncode != 0 and b"revoked" in result.stderr
    listed = json.loads(_run(isolated_home, "keys", "list", "--format", "json").stdout)
    assert [k["revoked"] for k in listed] == [True]


def test_locked_full_and_read_only_state_are_named_not_called_damage(tmp_path: Path) -> None:
    state = StateDB(tmp_path / "state.db")
    try:
        for text, said in [
            ("database is locked", "locked by another process"),
            ("database or disk is full", "is full"),
            ("attempt to write a readonly database", "read-only"),
        ]:
            message = state._guard(sqlite3.OperationalError(text)).message
            assert said in message and "move it aside" not in message
    finally:
        state.close()


@pytest.mark.may_skip_in_ci("as root it needs a private mount namespace (unshare -m), which a container may refuse")
def test_a_store_on_a_read_only_mount_can_still_be_read(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    store = Store(folder / "store.db")
    store.write("local", WriteRequest(content="readable on a read-only mount"))
    store.close()
    home = tmp_path / "reader-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update({"MNEMO_HOME": str(home), "MNEMO_STORE": str(folder / "store.db")})
    steps = f'"{MNEMO}" recent --format ndjson; echo "read=$?" >&2; "{MNEMO}" write nope; echo "write=$?" >&2'
    if os.geteuid() == 0:
        # Root writes through any mode bits: a read-only bind mount in a private mount namespace is the real thing.
        mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && {{ {steps}; }}"
        result = subprocess.run(
            ["unshare", "-m", "sh", "-c", mount], capture_output=True, env=env, timeout=60, check=False
        )
        if b"read=" not in result.stderr:
            pytest.skip(f"no private mount namespace on this machine: {result.stderr[-200:]!r}")
    else:
        folder.chmod(0o555)
        (folder / "store.db").chmod(0o444)
        try:
            result = subprocess.run(["sh", "-c", steps], capture_output=True, env=env, timeout=60, check=False)
        finally:
            folder.chmod(0o755)
    assert b"read=0" in result.stderr, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["content"] == "readable on a read-only mount"
    assert b"write=6" in result.stderr and b"read-only" in result.stderr and b"move it aside" not in result.stderr


def test_the_server_answers_503_not_500_when_its_own_store_fails(tmp_path: Path) -> None:
    from mnemo_tui.server.envelope import translate as _translate

    translated = _translate(LocalStateError("the disk holding store x is full"))
    assert isinstance(translated, Unavailable) and translated.status == 503


def test_ids_and_codes_an_endpoint_sends_reach_the_terminal_sanitized(isolated_home: Path) -> None:
    hostile = "id\x1b]0;PWNED\x07"
    canned = Canned()
    canned.answer(200, {"stored": True, "atom_id": hostile, "importance": 0.0, "reason": "", "superseded": []})
    room = {"room_id": "room_X\x1b]52;c;ZXZpbA==\x07", "name": "r", "address": "xroom:room_X\x1b[2K", "role": "owner"}
    canned.answer(200, {"items": [], "next_cursor": None})
    canned.answer(200, [{**room, "scope": "read_write", "archived": False}])
    with serving(canned) as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": KEY_SHAPED}
        wrote = _run(isolated_home, "write", "hi", env=env)
        listed = _run(isolated_home, "recent", env=env)
    for result in (wrote, listed):
        assert b"\x1b" not in result.stdout + result.stderr and b"\x07" not in result.stdout + result.stderr
    assert wrote.stdout.strip() == b"id\\x1b]0;PWNED\\x07"
    assert b"xroom:room_X\\x1b]52;c;ZXZpbA==\\x07" in listed.stdout


def test_a_limit_spelled_in_other_digits_is_a_usage_error_on_the_fast_path(isolated_home: Path) -> None:
    for command in ("recent", "catchup"):
        result = _run(isolated_home, command, "--limit", "\u00b2")
        assert result.returncode == 2 and b"internal error" not in result.stderr


def test_a_key_file_others_may_read_is_refused_not_used(tmp_path: Path) -> None:
    from mnemo_tui.state import credentials
    from mnemo_tui.state.config import resolve

    settings = resolve(endpoint="http://127.0.0.1:1/api/v1", env={"MNEMO_HOME": str(tmp_path)})
    path = credentials.credentials_file(settings)
    path.write_text(json.dumps({settings.endpoint: KEY_SHAPED}))
    path.chmod(0o644)
    with pytest.raises(LocalStateError, match="may be read by others"):
        credentials.lookup_key(settings)
    path.chmod(0o600)
    assert credentials.lookup_key(settings) == (KEY_SHAPED, "file")
