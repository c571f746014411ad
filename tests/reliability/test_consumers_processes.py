"""Parallel passes of one durable consumer, each a `mnemo catchup` process on its own machine's state, against 1 and
2 `mnemo serve` processes over one SQLite store or one PostgreSQL database, while writer processes write: in each
round exactly one pass commits and the other exits 9, and across the committed passes every acknowledged entry is
delivered exactly once (docs/consumers.md)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.engine.sqlite.store import Store
from tests.support.cli import MNEMO
from tests.support.serve import ServeProcess, servers_over_database, start_serve, start_writers

pytestmark = pytest.mark.slow

WRITERS = 2
WRITES = 40  # per writer
ROUNDS = 2
BIG = 12  # entries of 9,000 characters a round: more than a pipe holds, so the first pass waits mid-walk

WRITER = """
import sys, httpx
url, key, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with httpx.Client(base_url=url, headers={"X-Api-Key": key}, timeout=60) as c:
    for i in range(count):
        r = c.post("/memory/write", json={"content": f"{name} {i}", "domain": f"d{i % 3}"})
        assert r.status_code == 200, (r.status_code, r.text)
        print(r.json()["atom_id"], flush=True)
"""


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
        writers = start_writers(WRITER, servers, key, WRITERS, WRITES)
        try:
            with httpx.Client(headers={"X-Api-Key": key}, timeout=60) as c:
                for round_ in range(ROUNDS):
                    for i in range(BIG):
                        r = c.post(
                            urls[i % len(urls)] + "/memory/write", json={"content": f"{round_}.{i} " + "x" * 9000}
                        )
                        assert r.status_code == 200, r.text
                        written.append(r.json()["atom_id"])
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
        finally:
            for writer in writers:
                out, err = writer.communicate(timeout=300)
                assert writer.returncode == 0, err
                written += out.split()
        last = catchup(urls[0], key, tmp_path / "last")
        out, err = last.communicate(timeout=120)
        assert last.returncode == 0, err
        delivered += ids(out)
    assert len(delivered) == len(set(delivered)), "an entry was delivered twice across committed passes"
    assert sorted(delivered) == sorted(written), "an acknowledged entry was skipped"
