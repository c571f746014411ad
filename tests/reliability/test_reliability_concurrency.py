"""Four writer processes and two catch-up consumers at once: every consumer sees every entry of its scope exactly once."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from mnemo_tui.engine.sqlite.store import Store
from tests.support.reliability import HERE, PYTHON, Target, integrity, read_lines, serving

WRITERS = 4
PER_WRITER = 60  # half in the writer's own domain, half in the shared room


def _room(store_path: Path) -> str:
    store = Store(store_path)
    try:
        return store.create_room("alice", "shared").address
    finally:
        store.close()


def _run_fleet(tmp_path: Path, target: Target, room: str, overlap_us: int) -> None:
    """Start the writers and both consumers together; stop the consumers once every writer is done."""
    home = tmp_path / "home"
    stop = tmp_path / "stop"
    env = target.env(home)
    consumers = [
        subprocess.Popen(
            [PYTHON, str(HERE), "consumer", *target.args(), "--consumer", name, "--via", via, "--scopes", f",{room}",
             "--limit", str(limit), "--overlap", str(overlap_us), "--stop", str(stop), "--out", str(tmp_path / f"{name}.log")],
            env=env,
        )
        for name, via, limit in (("lib-reader", "lib", 7), ("cli-reader", "cli", 5))
    ]  # fmt: skip
    writers: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"{n}.log.ready").exists() for n in ("lib-reader", "cli-reader")):
            assert time.monotonic() < deadline and all(c.poll() is None for c in consumers), "a consumer did not start"
            time.sleep(0.01)
        writers += [
            subprocess.Popen(
                [PYTHON, str(HERE), "writer", *target.args(), "--domain", f"d{i}", "--room", room,
                 "--count", str(PER_WRITER), "--pause", "0.02", "--seed", str(i), "--out", str(tmp_path / f"w{i}.log")],
                env=env,
            )
            for i in range(WRITERS)
        ]  # fmt: skip
        for w in writers:
            assert w.wait(timeout=120) == 0
        stop.touch()
        for c in consumers:
            assert c.wait(timeout=120) == 0
    finally:
        for p in writers + consumers:
            if p.poll() is None:
                p.kill()
                p.wait()


def _assert_exactly_once(tmp_path: Path, room: str) -> None:
    written: dict[str, set[str]] = {"": set(), room: set()}
    for i in range(WRITERS):
        for line in read_lines(tmp_path / f"w{i}.log"):
            scope, atom = line.split("\t")
            written[scope].add(atom)
    assert len(written[""]) == len(written[room]) == WRITERS * PER_WRITER // 2
    for name in ("lib-reader", "cli-reader"):
        seen: dict[str, Counter[str]] = {"": Counter(), room: Counter()}
        for line in read_lines(tmp_path / f"{name}.log"):
            scope, atom = line.split("\t")
            seen[scope][atom] += 1
        passes = int((tmp_path / f"{name}.log.passes").read_text())
        assert passes >= 2, f"{name} made only {passes} pass(es): nothing overlapped the writers"
        for scope, ids in written.items():
            repeated = sorted(a for a, n in seen[scope].items() if n > 1)
            lost = sorted(ids - set(seen[scope]))
            foreign = sorted(set(seen[scope]) - ids)
            assert (lost, repeated, foreign) == ([], [], []), f"{name} scope {scope or 'own store'!r}"


@pytest.mark.slow
def test_writers_and_consumers_at_once_on_the_embedded_store_lose_and_repeat_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    room = _room(store_path)
    target = Target("embedded", store_path)
    _run_fleet(tmp_path, target, room, overlap_us=0)
    _assert_exactly_once(tmp_path, room)
    assert integrity(store_path) == "ok"
    assert integrity(tmp_path / "home" / "state.db") == "ok"


@pytest.mark.slow
def test_writers_and_consumers_at_once_over_mnemo_serve_lose_and_repeat_nothing(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    room = _room(store_path)
    with serving(store_path, tmp_path / "home") as server:
        # The endpoint's default overlap (2 s) re-reads below the watermark; the boundary ids absorb it.
        _run_fleet(tmp_path, server.target("alice"), room, overlap_us=2_000_000)
    _assert_exactly_once(tmp_path, room)
    assert integrity(store_path) == "ok"
    assert integrity(tmp_path / "home" / "state.db") == "ok"
