"""`catchup --all-scopes`: one pass over the own store and every room, a watermark per scope (docs/cli.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.state.statedb import StateDB, StateKey
from tests.support.serve import start_serve

pytestmark = pytest.mark.timeout(180)


def _two_rooms(cli: Any, *root: str) -> tuple[str, str]:
    ops = cli(*root, "rooms", "create", "ops").stdout.strip()
    dev = cli(*root, "rooms", "create", "dev").stdout.strip()
    assert ops.startswith("xroom:") and dev.startswith("xroom:")
    cli(*root, "write", "own entry", "--scope", "ci")
    cli(*root, "write", "ops entry", "--scope", ops)
    cli(*root, "write", "dev entry", "--scope", dev)
    return ops, dev


def test_one_pass_reads_the_own_store_and_every_room_each_item_keeping_its_scope(run_cli: Any) -> None:
    ops, dev = _two_rooms(run_cli)
    first = run_cli("catchup", "--all-scopes", "-f", "json")
    assert first.code == 0, first.stderr
    doc = json.loads(first.stdout)
    assert list(doc) == ["scopes"]
    assert doc["scopes"][0]["scope"] is None and {d["scope"] for d in doc["scopes"]} == {None, ops, dev}
    by_scope = {d["scope"]: d for d in doc["scopes"]}
    assert [i["content"] for i in by_scope[None]["items"]] == ["own entry"]
    assert [(i["content"], i["domain"]) for i in by_scope[ops]["items"]] == [("ops entry", ops)]
    assert [(i["content"], i["domain"]) for i in by_scope[dev]["items"]] == [("dev entry", dev)]
    for d in doc["scopes"]:
        assert set(d) >= {"scope", "consumer", "items", "watermark", "pages", "repeats_skipped", "resumed"}
        assert d["watermark"]["after"]["scope"] == d["scope"]
    # One watermark per scope, each the scope's own.
    marks = json.loads(run_cli("watermark", "list", "-f", "json").stdout)
    assert sorted((m["scope"] or "") for m in marks) == sorted(["", ops, dev])
    # Nothing new anywhere: --exit-code is 1, and the table says so on stdout.
    again = run_cli("catchup", "--all-scopes", "--exit-code")
    assert again.code == 1 and "Nothing new for consumer 'default' in your own store or your 2 rooms." in again.stdout
    # Something new in one room only: exit 0, that entry alone, the row showing its room.
    run_cli("write", "later in dev", "--scope", dev)
    later = run_cli("catchup", "--all-scopes", "--exit-code", "-f", "ndjson")
    assert later.code == 0 and [json.loads(line)["content"] for line in later.stdout.splitlines()] == ["later in dev"]
    run_cli("write", "later in ops", "--scope", ops)
    table = run_cli("catchup", "--all-scopes")
    assert table.code == 0 and ops in table.stdout and "later in ops" in table.stdout
    assert "room 'ops'" in table.stderr and "1 new entry" in table.stderr


def test_a_scope_that_fails_leaves_its_watermark_and_the_others_still_run(run_cli: Any, isolated_home: Path) -> None:
    ops, dev = _two_rooms(run_cli)
    # A pass of the same consumer on `ops` is running (this test process holds its claim).
    backend = LocalBackend.open(isolated_home / "store.db", "local")
    state = StateDB(isolated_home / "state.db")
    try:
        state.claim_run(StateKey.of(backend, "default", ops), "held-by-the-test")
        failed = run_cli("catchup", "--all-scopes", "-f", "json")
        doc = json.loads(failed.stdout)
        by_scope = {d["scope"]: d for d in doc["scopes"]}
        assert failed.code == by_scope[ops]["error"]["exit_code"] != 0
        assert "another catchup" in by_scope[ops]["error"]["message"] and by_scope[ops]["items"] == []
        assert f"room 'ops' ({ops}): another catchup" in failed.stderr
        assert [i["content"] for i in by_scope[dev]["items"]] == ["dev entry"]  # after the failed one, still run
        marks = {m["scope"] for m in json.loads(run_cli("watermark", "list", "-f", "json").stdout)}
        assert marks == {None, dev}  # the failed scope's watermark did not move
        state.release_run(StateKey.of(backend, "default", ops), "held-by-the-test")
    finally:
        state.close()
        backend.close()
    # The next pass reads what the failed one did not, and nothing else again.
    rest = run_cli("catchup", "--all-scopes", "-f", "ndjson")
    assert rest.code == 0 and [json.loads(line)["content"] for line in rest.stdout.splitlines()] == ["ops entry"]


def test_all_scopes_does_not_take_a_scope(run_cli: Any) -> None:
    refused = run_cli("catchup", "--all-scopes", "--scope", "ci")
    assert refused.code == 2 and "does not take --scope" in refused.stderr


def test_all_scopes_against_a_real_serve_walks_each_room_of_the_key(run_cli: Any, isolated_home: Path) -> None:
    key = run_cli("keys", "create", "alice").stdout.strip()
    server = start_serve(isolated_home)
    try:
        remote = ("--endpoint", server.url)
        env = {"MNEMO_API_KEY": key, "MNEMO_STATE": str(isolated_home / "client-state.db")}

        def as_alice(*args: str) -> Any:
            return run_cli(*remote, *args, env=env)

        _two_rooms(as_alice)
        first = as_alice("catchup", "--all-scopes", "-f", "ndjson")
        assert first.code == 0, first.stderr
        assert sorted(json.loads(line)["content"] for line in first.stdout.splitlines()) == [
            "dev entry",
            "ops entry",
            "own entry",
        ]
        assert as_alice("catchup", "--all-scopes", "--exit-code").code == 1
    finally:
        server.stop()


def test_resume_continues_each_scopes_own_interrupted_walk(cli: Any, isolated_home: Path) -> None:
    import fcntl
    import os
    import signal
    import subprocess
    import termios
    import threading

    from mnemo_tui.engine.sqlite.store import Store
    from mnemo_tui.values.writes import WriteRequest
    from tests.support.cli import MNEMO

    ops = cli("rooms", "create", "ops").stdout.strip()
    cli("write", "ops entry", "--scope", ops)
    store = Store(isolated_home / "store.db")
    store.bulk_insert([("local", WriteRequest(f"own {i} " + "x" * 200), i + 1) for i in range(2000)])
    store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_HOME=str(isolated_home), NO_COLOR="1")
    # stdout a pipe not read yet: the pass stops part-way through the own store, then is killed.
    proc = subprocess.Popen(
        [MNEMO, "catchup", "--all-scopes", "--limit", "10", "-f", "ndjson"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdout is not None
    pause = threading.Event()
    for _ in range(2000):  # until the pipe holds half its 64 KiB (bounded)
        held = int.from_bytes(fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, b"\0\0\0\0"), "little")
        if held >= 32768 or proc.poll() is not None:
            break
        pause.wait(0.01)
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    first = [json.loads(line)["content"] for line in proc.stdout.read().split(b"\n")[:-1]]
    proc.wait(timeout=30)
    assert first and "ops entry" not in first
    rest = cli("catchup", "--all-scopes", "--resume", "-f", "ndjson")
    assert rest.code == 0, rest.stderr
    second = [json.loads(line)["content"] for line in rest.stdout.splitlines()]
    assert "ops entry" in second  # the room, never begun, reads whole
    assert set(first) | set(second) == {f"own {i} " + "x" * 200 for i in range(2000)} | {"ops entry"}
    # Resumed, not re-read: at most one page comes again (the one being written when it was killed, or the one
    # flushed whose checkpoint the kill came before).
    assert len(set(first) & set(second)) <= 10


def test_a_usage_error_of_all_scopes_is_said_once_before_any_output(run_cli: Any) -> None:
    _two_rooms(run_cli)
    for bad in (("--since", "1M"), ("--consumer", " "), ("--overlap", "soon")):
        refused = run_cli("catchup", "--all-scopes", "-f", "json", *bad)
        assert refused.code == 2 and refused.stdout == "", bad
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert json.loads(run_cli("watermark", "list", "-f", "json").stdout) == []
