"""Provides the CLI benchmarks: `recent` cold start against a bare Python start, and `recent --all` against `sqlite3 -json`."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import DATA, PRINCIPAL, build_store

BIN = Path(sys.executable).parent
MNEMO = shutil.which("mnemo", path=str(BIN)) or "mnemo"
SQLITE3 = shutil.which("sqlite3")
VALGRIND = shutil.which("valgrind")


# The measuring process: it starts the command and reads that child's own rusage with wait4. It is a
# small fresh process on purpose: a child's max RSS includes the memory of whatever process forked it
# (Linux keeps the pre-exec high-water mark), so forking from this benchmark, which holds whole
# stores in memory while it builds them, would inflate the figure. The floor is this launcher's ~10 MB.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
cmd = json.loads(sys.argv[1])
with open(os.devnull, "wb") as sink:
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
cpu = usage.ru_utime + usage.ru_stime
print(json.dumps([elapsed, usage.ru_maxrss, os.waitstatus_to_exitcode(status), cpu]))
"""


def alternate(
    a: list[str], b: list[str], env: dict[str, str], reps: int
) -> tuple[list[float], list[float], list[float], list[float], list[float], list[float]]:
    """`a` and `b` run in turn `reps` times: each one's wall and CPU seconds, and the ratios a/b of each pair."""
    wall_a, wall_b, cpu_a, cpu_b, walls, cpus = [], [], [], [], [], []
    for _ in range(reps):
        wa, ca, _, _ = run_child_cpu(a, env)
        wb, cb, _, _ = run_child_cpu(b, env)
        wall_a.append(wa)
        wall_b.append(wb)
        cpu_a.append(ca)
        cpu_b.append(cb)
        walls.append(wa / wb)
        cpus.append(ca / cb)
    return wall_a, wall_b, cpu_a, cpu_b, walls, cpus


def run_child_cpu(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, int]:
    """Run `cmd` with stdout to /dev/null; returns (wall seconds, the child's own CPU seconds (user + system),
    its max RSS in KiB, exit code)."""
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, json.dumps(cmd)], env=env, capture_output=True, check=True
    ).stdout
    elapsed, rss, code, cpu = json.loads(out)
    return float(elapsed), float(cpu), int(rss), int(code)


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """Run `cmd` with stdout to /dev/null; returns (wall seconds, the child's own max RSS in KiB, exit code)."""
    elapsed, _, rss, code = run_child_cpu(cmd, env)
    return elapsed, rss, code


def instructions(cmd: list[str], env: dict[str, str]) -> int:
    """The instructions `cmd` runs, counted by callgrind: the same figure whatever else the machine runs."""
    assert VALGRIND is not None
    done = subprocess.run(
        [VALGRIND, "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env={**env, "PYTHONHASHSEED": "0"},  # string hashes decide dictionary probes: one seed, one count
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found is not None, done.stderr[-500:]
    return int(found.group(1))


def _env(store: Path, home: str) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE is dropped: an installed mnemo has its byte code (see `_compiled`).
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(MNEMO_HOME=home, MNEMO_STORE=str(store), MNEMO_PRINCIPAL=PRINCIPAL, NO_COLOR="1")
    return env


def _compiled() -> None:
    """Write the byte code of the package being measured, as `pip install` does for an installed one.

    A checkout whose sources changed since their byte code was written, in a shell that sets
    PYTHONDONTWRITEBYTECODE, would otherwise compile those modules in every measured start (~5 ms
    for the feed module alone), a cost no installed mnemo pays.
    """
    import mnemo_tui

    package = str(Path(mnemo_tui.__file__).resolve().parent)
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, capture_output=True)


COLD_START_GOAL = "≤ 2.2x"
BARE_START = '`python -c "import sqlite3, json"` in the same venv'


def _timed(name: str, mine: list[float], anchor: list[float], ratios: list[float], how: str) -> dict[str, Any]:
    """A row of seconds measured in alternated pairs: medians in milliseconds, and of the pairs' ratios."""
    return {
        "name": name,
        "value": round(statistics.median(mine) * 1000, 1),
        "unit": "ms",
        "anchor": round(statistics.median(anchor) * 1000, 1),
        "ratio": round(statistics.median(ratios), 2),
        "goal": COLD_START_GOAL,
        "anchor_is": f"{BARE_START} ({how})",
    }


def cold_start(store: Path, reps: int) -> list[dict[str, Any]]:
    """`mnemo recent --limit 20 --format ndjson` against `python -c "import sqlite3, json"`, alternated: wall
    and CPU time, and (with valgrind) the instructions of each, which no other load on the machine moves."""
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as home:
        env = _env(store, home)
        mnemo = [MNEMO, "recent", "--limit", "20", "--format", "ndjson"]
        bare = [sys.executable, "-c", "import sqlite3, json"]
        for _ in range(3):
            assert run_child(mnemo, env)[2] == 0, "mnemo recent failed"
            run_child(bare, env)
        wall_a, wall_b, cpu_a, cpu_b, walls, cpus = alternate(mnemo, bare, env, reps)
        counted = (instructions([sys.executable, *mnemo], env), instructions(bare, env)) if VALGRIND else None
    rows = [
        _timed(
            "`mnemo recent --limit 20 --format ndjson` cold start", wall_a, wall_b, walls, "median of alternated pairs"
        ),
        _timed(
            "the same cold start, CPU time (user + system)",
            cpu_a,
            cpu_b,
            cpus,
            "median of alternated pairs, each child's rusage",
        ),
    ]
    if counted is not None:
        rows.append(
            {
                "name": "the same cold start, instructions (callgrind)",
                "value": round(counted[0] / 1e6, 1),
                "unit": "M instructions",
                "anchor": round(counted[1] / 1e6, 1),
                "ratio": round(counted[0] / counted[1], 2),
                "goal": COLD_START_GOAL,
                "anchor_is": f"{BARE_START} (one run each, PYTHONHASHSEED=0)",
            }
        )
    return rows


def demo_store(entries: int) -> tuple[Path, int]:
    """A store `mnemo demo --entries N --seed 7` filled (cached under benchmarks/.data/), and how many of its
    entries `recent --all` prints (the own store's, superseded ones hidden)."""
    import sqlite3

    DATA.mkdir(exist_ok=True)
    path = DATA / f"demo-{entries}.db"
    if not path.exists():
        with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as home:
            tmp = path.with_suffix(".tmp")
            for suffix in ("", "-wal", "-shm"):
                Path(str(tmp) + suffix).unlink(missing_ok=True)
            subprocess.run(
                [MNEMO, "demo", "--entries", str(entries), "--seed", "7"],
                env=_env(tmp, home),
                capture_output=True,
                check=True,
            )
            db = sqlite3.connect(tmp)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()
            tmp.rename(path)
    db = sqlite3.connect(path)
    shown = db.execute(
        "SELECT count(*) FROM atoms WHERE bucket = (SELECT bucket FROM buckets WHERE kind = 'own' AND owner = ?) "
        "AND superseded_by IS NULL",
        (PRINCIPAL,),
    ).fetchone()[0]
    db.close()
    return path, int(shown)


def all_rate(store: Path, n: int, reps: int, label: str | None = None) -> list[dict[str, Any]]:
    """`mnemo recent --all --format ndjson` against `sqlite3 -json` dumping the same rows, alternated."""
    if SQLITE3 is None:
        return [
            {
                "name": "recent --all rate",
                "value": None,
                "unit": "entries/s",
                "anchor": None,
                "ratio": None,
                "goal": "≥ 0.5x",
                "anchor_is": "sqlite3 CLI not installed (scripts/setup-dev.sh)",
            }
        ]
    sql = (
        "SELECT atom_id, content, domain, created_at, concepts, principal, agent, agent_name, client_env "
        "FROM atoms WHERE bucket = (SELECT bucket FROM buckets WHERE kind = 'own' AND owner = 'local') "
        "AND superseded_by IS NULL ORDER BY created_at DESC, atom_id DESC"
    )
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as home:
        env = _env(store, home)
        mnemo = [MNEMO, "recent", "--all", "--format", "ndjson"]
        dump = [SQLITE3, "-readonly", "-json", str(store), sql]
        lines = subprocess.run(mnemo, env=env, capture_output=True, check=True).stdout.count(b"\n")
        assert lines == n, f"mnemo recent --all printed {lines} lines, expected {n}"
        ta, tb, ra, rb, ratios = [], [], [], [], []
        for _ in range(reps):
            a, rss_a, code_a = run_child(mnemo, env)
            b, rss_b, code_b = run_child(dump, env)
            assert code_a == 0 and code_b == 0
            ta.append(a)
            tb.append(b)
            ra.append(rss_a)
            rb.append(rss_b)
            ratios.append((n / a) / (n / b))
    rate, anchor = n / statistics.median(ta), n / statistics.median(tb)
    where = label or f"{n:,} entries"
    return [
        {
            "name": f"`mnemo recent --all --format ndjson` over {where}",
            "value": round(rate),
            "unit": "entries/s",
            "anchor": round(anchor),
            "ratio": round(statistics.median(ratios), 2),
            "goal": "≥ 1.0x",
            "anchor_is": "`sqlite3 -json` dumping the same rows in the same order (median of alternated pairs)",
        },
        {
            "name": f"`mnemo recent --all` peak memory over {where}",
            "value": round(max(ra) / 1024, 1),
            "unit": "MB",
            "anchor": round(max(rb) / 1024, 1),
            "ratio": round(max(ra) / max(rb), 2),
            "goal": "< 100 MB",
            "anchor_is": "the `sqlite3 -json` dump's max RSS (child rusage via wait4)",
        },
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Cold start on the 1,000,000-entry store and the `--all` rate over 800,000 entries (--quick: a tenth)."""
    _compiled()
    big = build_store(100_000 if quick else 1_000_000)
    n_all = 80_000 if quick else 800_000
    rows = cold_start(big, 21 if quick else 41)
    rows += all_rate(build_store(n_all), n_all, 5 if quick else 7)
    demo, shown = demo_store(10_000 if quick else 100_000)
    rows += all_rate(
        demo,
        shown,
        7 if quick else 9,
        label=f"a demo store (`mnemo demo --entries {10_000 if quick else 100_000:,}`: {shown:,} own entries)",
    )
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
