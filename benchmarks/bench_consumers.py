"""Provides the durable consumers' benchmark: a catch-up pass of 10,000 new entries against a real `mnemo serve`,
its watermark kept by the server's consumer, next to the same pass with a local watermark, alternated in one run.

    .venv/bin/python benchmarks/bench_consumers.py [--quick]

The server's consumer costs one read at the start and one commit at the end of the pass (docs/consumers.md):
the goal is at most 1.1x the local pass.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.backends.remote_consumers import kept_by
from mnemo_tui.catchup.catchup import CatchUp
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.values.writes import WriteRequest

READY = re.compile(r"ready at (http://\S+/api/v1)")
GOAL = "≤ 1.1x"
MNEMO = str(Path(sys.executable).with_name("mnemo"))


def _serve(store: Path, home: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [MNEMO, "serve", "--port", "0"],
        env={"MNEMO_HOME": str(home), "MNEMO_STORE": str(store), "PATH": "/usr/bin:/bin"},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # bounded by the process: it ends if serve fails
        found = READY.search(line)
        if found:
            return proc, found.group(1)
    raise SystemExit("mnemo serve did not start")


def run(quick: bool = False) -> list[dict[str, Any]]:
    entries = 1_000 if quick else 10_000
    trials = 3 if quick else 7
    with tempfile.TemporaryDirectory() as where:
        root = Path(where)
        store = Store(root / "store.db")
        key = store.create_key("alice")[1]
        store.bulk_insert([("alice", WriteRequest(content=f"entry {i} " + "x" * 200), 0) for i in range(entries)])
        store.close()
        proc, url = _serve(root / "store.db", root)
        try:
            backend = RemoteBackend(url, key)
            state = StateDB(root / "state.db")
            server = kept_by(backend, state, lambda text: None)
            timings: dict[str, list[float]] = {"server": [], "local": []}
            for trial in range(trials):
                for kind in ("server", "local") if trial % 2 == 0 else ("local", "server"):
                    kept = server if kind == "server" else state
                    kept.reset(StateKey.of(backend, "bench", None))  # every pass reads all entries as new
                    walk = CatchUp(backend, kept, consumer="bench")
                    start = time.perf_counter()
                    result = walk.run(lambda page: None)
                    timings[kind].append(time.perf_counter() - start)
                    assert result.delivered == entries and result.committed, result
            backend.close()
            state.close()
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    mine, anchor = statistics.median(timings["server"]), statistics.median(timings["local"])
    return [
        {
            "name": f"catchup of {entries:,} new entries, watermark on the server",
            "value": round(mine * 1000, 1),
            "unit": "ms",
            "anchor": round(anchor * 1000, 1),
            "anchor_is": "the same pass with a local watermark",
            "ratio": round(mine / anchor, 3),
            "goal": GOAL,
        }
    ]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
