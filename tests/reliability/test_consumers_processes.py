"""Parallel passes of one durable consumer, each a `mnemo catchup` process on its own machine's state, against 1 and
2 `mnemo serve` processes over one SQLite store or one PostgreSQL database, while writer processes write: in each
round exactly one pass commits and the other exits 9, and across the committed passes every acknowledged entry is
delivered exactly once (docs/consumers.md). The writers write until every round has ended (told by a stop file), and
each round is checked to have had writes acknowledged while its passes ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.engine.sqlite.store import Store
from tests.support.cli import MNEMO
from tests.support.serve import ServeProcess, servers_over_database, start_serve

pytestmark = pytest.mark.slow

WRITERS = 2
WRITES = 5000  # per writer at most: the bound of a writer the stop file never reaches
ROUNDS = 2
BIG = 12  # entries of 9,000 characters a round: more than a pipe holds, so the first pass waits mid-walk

# Writes until the stop file exists (or `count` writes), each acknowledged id appended to `log` as it lands: the
# test reads the logs' lengths at a round's start and end to know what was written while the round ran. A trickle
# (a pause between writes) rather than a flood: the last pass reads every entry a page of one at a time.
WRITER = """
import os, sys, time, httpx
url, key, name, count, log, stop = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
with httpx.Client(base_url=url, headers={"X-Api-Key": key}, timeout=60) as c, open(log, "a") as out:
    for i in range(count):
        if os.path.exists(stop):
            break
        r = c.post("/memory/write", json={"content": f"{name} {i}", "domain": f"d{i % 3}"})
        assert r.status_code == 200, (r.status_code, r.text)
        out.write(r.json()["atom_id"] + "\\n")
        out.flush()
        time.sleep(PAUSE)
""".replace("PAUSE", "0.05")


@contextmanager
def sqlite_servers(tmp_path: Path, count: int) -> Iterator[tuple[str, list[ServeProcess]]]:
    """`count` `mnemo serve` processes over one embedded store file, and a key of `team`."""
    store_path = tmp_path / "shared.db"
    store = Store(store_path)
    key = store.create_key("team")[1]
    store.close()
    servers: list[ServeProcess] = []
    try:
        for i in range(count):
            home = tmp_path / f"server{i}"
            home.mkdir()
            servers.append(start_serve(home, store=store_path))
        yield key, servers
    finally:
        for server in servers:
            if server.proc.poll() is None:
                server.stop()


def catchup(url: str, key: str, machine: Path) -> subprocess.Popen[str]:
    """`mnemo catchup --consumer ci` as a machine of its own (its own state database), NDJSON on a pipe."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env |= {"MNEMO_HOME": str(machine), "MNEMO_ENDPOINT": url, "MNEMO_API_KEY": key}
    machine.mkdir(exist_ok=True)
    return subprocess.Popen(
        [MNEMO, "catchup", "--consumer", "ci", "--limit", "1", "-f", "ndjson"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def ids(text: str) -> list[str]:
    return [json.loads(line)["atom_id"] for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_parallel_passes_one_commits_the_other_exits_9_and_nothing_is_skipped_or_repeated(
    engine: str, count: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if engine == "postgres":
        databases: Any = request.getfixturevalue("pg_databases")
        servers_of = servers_over_database(databases.cluster.url(databases.create()), tmp_path, count)
    else:
        servers_of = sqlite_servers(tmp_path, count)
    with servers_of as (key, servers):
        urls = [s.url for s in servers]
        written: list[str] = []
        delivered: list[str] = []  # by the passes that committed, in order
        stop = tmp_path / "stop"
        logs = [tmp_path / f"writer{i}.log" for i in range(WRITERS)]
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, urls[i % len(urls)], key, f"w{i}", str(WRITES), str(log), str(stop)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i, log in enumerate(logs)
        ]
        during: list[int] = []  # per round: the writes sent after it began and acknowledged before it ended
        try:
            # The writers are under way before the first round begins (each has an acknowledged write).
            wait_for(lambda: all(lines(log) for log in logs), "every writer's first write")
            with httpx.Client(headers={"X-Api-Key": key}, timeout=60) as c:
                for round_ in range(ROUNDS):
                    for i in range(BIG):
                        r = c.post(
                            urls[i % len(urls)] + "/memory/write", json={"content": f"{round_}.{i} " + "x" * 9000}
                        )
                        assert r.status_code == 200, r.text
                        written.append(r.json()["atom_id"])
                    began = [lines(log) for log in logs]
                    first = catchup(urls[0], key, tmp_path / f"first{round_}")
                    assert first.stdout is not None
                    head = first.stdout.readline()  # it has its start position, and waits on its full pipe
                    assert head, first.stderr.read() if first.stderr else ""
                    second = catchup(urls[-1], key, tmp_path / f"second{round_}")
                    out, err = second.communicate(timeout=120)
                    assert second.returncode == 0, err
                    delivered += ids(out)
                    _rest, err = first.communicate(timeout=120)
                    assert first.returncode == 9, err
                    assert "another pass of consumer 'ci'" in err
                    # A writer's write after the one in flight when the round began was sent after it began.
                    during.append(sum(max(0, lines(log) - n - 1) for log, n in zip(logs, began, strict=True)))
        finally:
            stop.touch()
            for writer in writers:
                _out, err = writer.communicate(timeout=300)
                assert writer.returncode == 0, err
        for log in logs:
            written += log.read_text().split()
        assert all(during), f"a round ran while no write landed (writes during each round: {during})"
        assert all(lines(log) < WRITES for log in logs), "a writer ran out of writes before the stop file"
        last = catchup(urls[0], key, tmp_path / "last")
        out, err = last.communicate(timeout=120)
        assert last.returncode == 0, err
        delivered += ids(out)
    assert len(delivered) == len(set(delivered)), "an entry was delivered twice across committed passes"
    assert sorted(delivered) == sorted(written), "an acknowledged entry was skipped"


def lines(log: Path) -> int:
    """How many writes a writer's log holds (acknowledged ones; 0 before its first)."""
    try:
        return log.read_text().count("\n")
    except FileNotFoundError:
        return 0


def wait_for(condition: Callable[[], bool], what: str, wait: float = 120.0) -> None:
    """Polls `condition` until it holds, for at most `wait` seconds (a bound, never a timing assertion)."""
    deadline = time.monotonic() + wait
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
