"""kill -9 at random points: a catch-up walk never loses an entry, and a superseding write is all or nothing."""

from __future__ import annotations

import fcntl
import json
import random
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import timefmt
from mnemo_tui.engine import cursor as cursors
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.reliability import (
    HERE,
    MNEMO,
    PYTHON,
    Target,
    integrity,
    kill9,
    ndjson_ids,
    run_cli,
    start_server,
    supersession_consistent,
)

ENTRIES = 1200
LIMIT = 5
KILLS = 14
CONSUMER = "crashy"
# Lines a walk may print past what the test has read: a pipe of 4 KiB, the writer's own buffer and a page.
AHEAD = 120


def _fill(store_path: Path, n: int, start: int = 0) -> None:
    store = Store(store_path)
    try:
        now = timefmt.now_us()
        rows = [(WriteRequest(content=f"entry {start + i}", domain=f"d{i % 3}"), now - n + i) for i in range(n)]
        store.bulk_insert([("alice", r, t) for r, t in rows])
    finally:
        store.close()


def _visible(store_path: Path) -> list[tuple[int, str]]:
    """(created_at, atom_id) of every entry of alice's own store the feed shows."""
    store = Store(store_path)
    try:
        page_rows = store.db.execute(
            "SELECT a.created_at, a.atom_id FROM atoms a JOIN buckets b ON b.bucket = a.bucket "
            "WHERE b.kind = 'own' AND b.owner = 'alice' AND a.superseded_by IS NULL"
        ).fetchall()
    finally:
        store.close()
    return [(int(r[0]), str(r[1])) for r in page_rows]


def _assert_nothing_passed_unseen(
    target: Target, home: Path, delivered: set[str], *, must_have_watermark: bool = False
) -> None:
    """Neither the watermark nor the saved checkpoint has moved past an entry the consumer never printed."""
    entries = _visible(target.store)
    state = StateDB(home / "state.db")
    try:
        if target.kind == "embedded":
            identity, principal = str(target.store.resolve()), "alice"
        else:
            from mnemo_tui.backends.remote_calls import key_principal

            assert target.endpoint and target.key
            identity, principal = target.endpoint.rstrip("/"), key_principal(target.key)
        key = StateKey(identity, principal, CONSUMER, None)
        watermark: Any = state.load(key)
        checkpoint = state.load_checkpoint(key)
    finally:
        state.close()
    if target.kind != "embedded":  # `mnemo serve` keeps the consumer's watermark (docs/consumers.md)
        served = Store(target.store)
        try:
            watermark = served.consumer_position("alice", CONSUMER, None)
        finally:
            served.close()
    assert watermark is not None or not must_have_watermark, "the finished walk committed no watermark"
    if watermark is not None and watermark.created_at is not None:
        unseen = [a for c, a in entries if c <= watermark.created_at and a not in delivered]
        assert unseen == [], f"the watermark passed {len(unseen)} entries never printed"
    if checkpoint is not None and checkpoint.progress.newest is not None:
        store = Store(target.store)
        try:
            secret = store.secret
        finally:
            store.close()
        low = checkpoint.since if checkpoint.since is not None else -(2**63)
        if checkpoint.progress.cursor is None:
            position = (low, "")
        else:  # `mnemo serve` issues the engine's own cursors, bound to the key's principal there
            bound = cursors.binding("alice", RecentQuery(since=checkpoint.since))
            position = cursors.decode(secret, bound, checkpoint.progress.cursor)
        unseen = [
            a
            for c, a in entries
            if low <= c <= checkpoint.progress.newest and (c, a) >= position and a not in delivered
        ]
        assert unseen == [], f"the checkpoint passed {len(unseen)} entries never printed"


def _kill_walks(tmp_path: Path, target: Target, seed: int) -> None:
    home = tmp_path / "home"
    env = target.env(home)
    rng = random.Random(seed)
    outputs: list[Path] = []
    kills = 0
    argv = [MNEMO, "catchup", "--resume", "--consumer", CONSUMER, "--limit", str(LIMIT), "--format", "ndjson"]
    for round_no in range(KILLS):
        if round_no % 4 == 3:
            _fill(target.store, 40, start=10_000 * round_no)  # new entries land at the top between walks
        out = tmp_path / f"walk{round_no}.ndjson"
        outputs.append(out)
        delivered = {a for o in outputs for a in ndjson_ids(o)}
        remaining = len({a for _, a in _visible(target.store)} - delivered)
        # A random point of what is left of the walk, counted in printed entries, at least `AHEAD` before its
        # end: the walk writes into a pipe of one page that this test reads line by line, so it can never be
        # more than the pipe and its own buffer ahead of the reader, and is always still running at the kill.
        kill_after = rng.randint(1, max(1, remaining - AHEAD))
        with open(out, "wb") as fh:
            err = open(out.with_suffix(".err"), "wb")  # noqa: SIM115 - closed below, after the kill
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env)
            assert proc.stdout is not None
            fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
            read = 0
            while read < kill_after and (line := proc.stdout.readline()):
                fh.write(line)
                read += 1
            kill9(proc)
            fh.write(proc.stdout.read())  # what the walk printed before it died is printed
            proc.stdout.close()
            err.close()
            assert proc.returncode in (0, -9), out.with_suffix(".err").read_text()
            kills += proc.returncode == -9
        delivered = {a for o in outputs for a in ndjson_ids(o)}
        _assert_nothing_passed_unseen(target, home, delivered)
        assert integrity(home / "state.db") == "ok"
        assert integrity(target.store) == "ok"
    assert kills >= KILLS // 2, "most walks should have been killed half-way"
    # --resume finishes the interrupted walk; the next pass reads what landed on top since that walk began
    # (every walk was killed, so none of the later ones did); one more finds nothing left.
    for name in ("resume", "after", "empty"):
        out = tmp_path / f"{name}.ndjson"
        outputs.append(out)
        proc = run_cli(env, *argv[1:])
        assert proc.returncode == 0, proc.stderr
        out.write_text(proc.stdout)
    assert ndjson_ids(outputs[-1]) == []
    delivered_all = {a for o in outputs for a in ndjson_ids(o)}
    _assert_nothing_passed_unseen(target, home, delivered_all, must_have_watermark=True)
    printed = Counter(a for o in outputs for a in ndjson_ids(o))
    wanted = {a for _, a in _visible(target.store)}
    assert wanted - set(printed) == set(), "entries were lost"
    assert set(printed) - wanted == set()
    repeats = sum(n - 1 for n in printed.values())
    # Only the page in flight when a walk died may be printed again, never more.
    assert repeats <= kills * LIMIT
    assert integrity(home / "state.db") == "ok"
    assert integrity(target.store) == "ok"


@pytest.mark.slow
def test_catchup_killed_at_random_points_of_an_embedded_walk_loses_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    _fill(store_path, ENTRIES)
    _kill_walks(tmp_path, Target("embedded", store_path), seed=8)


@pytest.mark.slow
def test_catchup_killed_at_random_points_of_a_walk_over_mnemo_serve_loses_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    _fill(store_path, ENTRIES)
    server = start_server(store_path, tmp_path / "home")
    try:
        _kill_walks(tmp_path, server.target("alice"), seed=9)
    finally:
        server.stop()


def _superseder(target: Target, home: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PYTHON, str(HERE), "superseder", *target.args(), "--group", "32"],
        env=target.env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _atoms(store_path: Path) -> int:
    db = sqlite3.connect(store_path)
    try:
        return int(db.execute("SELECT count(*) FROM atoms").fetchone()[0])
    finally:
        db.close()


def _wait_for_writes(store_path: Path, more: int, proc: subprocess.Popen[bytes]) -> None:
    """Wait until `more` entries have landed since now (a random point of the writer's loop), or 60 s."""
    target = _atoms(store_path) + more
    deadline = time.monotonic() + 60
    while _atoms(store_path) < target and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)


def _assert_all_or_nothing(store_path: Path) -> int:
    assert integrity(store_path) == "ok"
    assert supersession_consistent(store_path) == []
    store = Store(store_path)
    try:
        finals = store.db.execute("SELECT supersedes FROM atoms WHERE content LIKE 'final %'").fetchall()
        superseded = store.db.execute("SELECT count(*) FROM atoms WHERE superseded_by IS NOT NULL").fetchone()[0]
    finally:
        store.close()
    # Each final entry replaced its whole group of 32, and nothing else was ever marked superseded.
    assert all(len(json.loads(f[0])) == 32 for f in finals)
    assert superseded == 32 * len(finals)
    return len(finals)


@pytest.mark.slow
def test_a_superseding_writer_killed_at_random_points_is_all_or_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    Store(store_path).close()
    target = Target("embedded", store_path)
    rng = random.Random(88)
    finals = 0
    for _ in range(12):
        proc = _superseder(target, tmp_path / "home")
        _wait_for_writes(store_path, rng.randint(5, 100), proc)  # groups of 32 drafts + 1 superseding write
        kill9(proc)
        finals = _assert_all_or_nothing(store_path)
    assert finals > 0, "no superseding write ever completed: the kills came too early to prove anything"


@pytest.mark.slow
def test_mnemo_serve_killed_during_superseding_writes_is_all_or_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    Store(store_path).close()
    rng = random.Random(89)
    finals = 0
    for _ in range(6):
        server = start_server(store_path, tmp_path / "home")
        writer = _superseder(server.target("alice"), tmp_path / "home")
        _wait_for_writes(store_path, rng.randint(5, 100), writer)
        kill9(server.proc)  # the process that holds the transaction dies, not just the client
        kill9(writer)
        finals = _assert_all_or_nothing(store_path)
    assert finals > 0


@pytest.mark.slow
def test_a_writer_killed_inside_its_superseding_transaction_leaves_no_trace_of_it(tmp_path: Path) -> None:
    """Deterministic: the writer freezes inside the transaction (new entry in, some olds marked), then dies."""
    store_path = tmp_path / "store.db"
    Store(store_path).close()
    target = Target("embedded", store_path)
    rng = random.Random(808)
    for round_no in range(5):
        freeze = tmp_path / f"frozen{round_no}"
        before = _assert_all_or_nothing(store_path)
        proc = subprocess.Popen(
            [PYTHON, str(HERE), "superseder", *target.args(), "--group", "32", "--freeze-in-tx", str(freeze),
             "--freeze-at", str(rng.randint(1, 3)), "--freeze-after", str(rng.randint(0, 31))],
            env=target.env(tmp_path / "home"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not freeze.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert freeze.exists(), "the writer never reached its superseding transaction"
        kill9(proc)
        after = _assert_all_or_nothing(store_path)
        # The frozen group's final entry is gone with its half-made links; the groups before it stand.
        store = Store(store_path)
        try:
            orphans = store.db.execute(
                "SELECT count(*) FROM atoms WHERE content LIKE 'draft %' AND superseded_by IS NULL"
            ).fetchone()[0]
        finally:
            store.close()
        assert after >= before
        assert orphans >= 32 * (round_no + 1), "each frozen group's 32 drafts stay live and unmarked"
