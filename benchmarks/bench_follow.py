"""Provides the follow benchmark (issue 38): push latency against the polling fallback, idle cost, 1,000 idle followers.

    python benchmarks/bench_follow.py [--quick] [--followers N]

(a) Latency: one `mnemo serve` offering `POST /memory/follow` and one the same but without it (the
    route answers 404 as the hosted service does, so the very same client falls back to polling),
    each on its own store, each followed by `mnemo recent --follow --format ndjson` (a subprocess).
    Writes go to both servers in turn, a few tens of milliseconds apart; a write's latency is from
    its HTTP answer arriving here to its line being read from the follower's stdout. p50/p99.
(b) Idle cost: while (c) runs, the two CLI followers of (a) sit idle; their servers' access logs
    count the requests they make, and (c)'s raw followers count the heartbeats they receive.
(c) 1,000 idle followers on one server (`--max-follows 1000 --max-connections 1200`), raw streamed
    requests from one asyncio process over several keys (the per-key bound is 100); the server's
    VmRSS before and with them open, and its CPU while they idle; then fan-out: writes that wake all
    of them, each write's arrival on every stream.
(d) Across servers on PostgreSQL (a cluster of its own, as the tests start one; skipped without the
    binaries): writes through server A, a CLI follower on B (LISTEN: woken by A's NOTIFY) and one on C
    (`--database-pooler transaction`: no LISTEN, its 1 s slow poll is the wake-up).

Figures are printed (rows as `run.py` prints them), never asserted.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from follow_children import FOLLOWERS_PROGRAM, NO_FOLLOW_PROGRAM  # noqa: E402

MNEMO = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"
PRINCIPAL = "bench"
HEARTBEAT = 15.0  # the server's heartbeat interval (docs/server.md, "Push follow")
FOLLOWERS = 1000
FAN_WRITES = 20
PER_KEY = 84  # < 100, the per-key bound: 12 keys carry the 1,000


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(MNEMO_HOME=str(home), NO_COLOR="1", **extra)
    return env


def make_store(path: Path, keys: int = 1) -> list[str]:
    """A new store with `keys` API keys of one principal."""
    from mnemo_tui.engine.sqlite.store import Store

    store = Store(path)
    try:
        return [store.create_key(PRINCIPAL)[1] for _ in range(keys)]
    finally:
        store.close()


class Server:
    """A server process on a free loopback port, its stderr (log, access lines) to a file."""

    def __init__(self, command: list[str], store: Path | None, home: Path, name: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.log = home / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=out, env=_env(home, MNEMO_STORE=str(store))
            )
        self.url = ""
        for _ in range(600):
            found = re.search(r"ready at (http://\S+/api/v1)", self.log.read_text(errors="replace"))
            if found:
                self.url = found.group(1)
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited: " + self.log.read_text(errors="replace")[-2000:])
            time.sleep(0.05)
        else:
            raise RuntimeError(f"{name} did not print its address")

    def requests_between(self, start: float, end: float) -> int:
        """The access-log lines stamped within [start, end] (epoch seconds). A request is logged as it
        ends, so an open stream is not counted; one that a client closes is, when it closes."""
        count = 0
        for line in self.log.read_text(errors="replace").splitlines():
            if " mnemo.access " not in line:
                continue
            at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as logged
            count += start <= at <= end
        return count

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def serve(store: Path | None, home: Path, *args: str) -> Server:
    return Server([MNEMO, "serve", "--port", "0", *args], store, home, "serve")


def serve_without_follow(store: Path, home: Path) -> Server:
    return Server([sys.executable, "-c", NO_FOLLOW_PROGRAM, str(store)], store, home, "serve-no-follow")


class Follower:
    """`mnemo recent --follow --format ndjson` against an endpoint; a thread stamps each line as it is read."""

    def __init__(self, url: str, key: str, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = _env(home, MNEMO_ENDPOINT=url, MNEMO_API_KEY=key)
        self.proc = subprocess.Popen(
            [MNEMO, "recent", "--follow", "--format", "ndjson"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.seen: dict[str, float] = {}
        self.repeated = 0
        self.lines = 0
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            at = time.perf_counter()
            atom = json.loads(raw)["atom_id"]
            with self.changed:
                self.lines += 1
                if atom in self.seen:
                    self.repeated += 1
                else:
                    self.seen[atom] = at
                self.changed.notify_all()

    def wait_for(self, ids: set[str] | int, seconds: float) -> bool:
        """Whether every id (or that many lines) was read within `seconds`."""
        end = time.monotonic() + seconds
        with self.changed:
            while (self.lines < ids) if isinstance(ids, int) else not ids <= self.seen.keys():
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return False
                self.changed.wait(left)
            return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def latency(pairs: dict[str, tuple[Any, Follower, str]], writes: int) -> dict[str, list[float]]:
    """Writes to every server in turn (the first one alternating), `writes` each, 20–60 ms apart; the
    milliseconds from each write's answer to its line read from that server's follower."""
    import httpx

    clients = {
        name: httpx.Client(base_url=srv.url, headers={"X-Api-Key": key}) for name, (srv, _, key) in pairs.items()
    }
    acked: dict[str, dict[str, float]] = {name: {} for name in pairs}
    names = list(pairs)
    rng = random.Random(38)
    try:
        for i in range(writes):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                answer = clients[name].post("/memory/write", json={"content": f"follow bench {name} {i}"})
                at = time.perf_counter()
                answer.raise_for_status()
                acked[name][answer.json()["atom_id"]] = at
            time.sleep(rng.uniform(0.02, 0.06))
    finally:
        for client in clients.values():
            client.close()
    out: dict[str, list[float]] = {}
    for name, (_, follower, _) in pairs.items():
        if not follower.wait_for(set(acked[name]), 60):
            missing = len(set(acked[name]) - follower.seen.keys())
            raise AssertionError(f"the {name} follower never printed {missing} of {writes} entries")
        if follower.repeated:
            raise AssertionError(f"the {name} follower printed {follower.repeated} entries twice")
        out[name] = [(follower.seen[a] - t) * 1000 for a, t in acked[name].items()]
    return out


def across(url: str, key: str, followers: dict[str, Follower], writes: int) -> dict[str, list[float]]:
    """`writes` writes through the server at `url`, 20–60 ms apart: the milliseconds from each write's answer to
    its line read from each follower (each on another server over the same database)."""
    import httpx

    acked: dict[str, float] = {}
    rng = random.Random(38)
    with httpx.Client(base_url=url, headers={"X-Api-Key": key}) as client:
        for i in range(writes):
            answer = client.post("/memory/write", json={"content": f"across {i}"})
            at = time.perf_counter()
            answer.raise_for_status()
            acked[answer.json()["atom_id"]] = at
            time.sleep(rng.uniform(0.02, 0.06))
    out: dict[str, list[float]] = {}
    for name, follower in followers.items():
        if not follower.wait_for(set(acked), 60) or follower.repeated:
            raise AssertionError(f"the {name} follower missed or repeated entries")
        out[name] = [(follower.seen[a] - t) * 1000 for a, t in acked.items()]
    return out


def postgres(root: Path, writes: int) -> dict[str, list[float]] | None:
    """Three `mnemo serve` over one PostgreSQL database (a cluster of its own, as the tests start): writes through
    A; a CLI follower on B (`--database-pooler none`: LISTEN, woken by A's NOTIFY) and one on C (the default
    `transaction`, as behind pgbouncer: no LISTEN, its 1 s slow poll is the wake-up). None without PostgreSQL."""
    sys.path.insert(0, str(HERE.parent))  # the repository: tests.support
    from mnemo_tui.engine.postgres.store import PgStore
    from mnemo_tui.values.writes import WriteRequest
    from tests.support import pg as pg_helpers

    if pg_helpers.binaries() is None:
        return None
    cluster = pg_helpers.start_cluster()
    databases = pg_helpers.Databases(cluster)
    servers: list[Server] = []
    clis: list[Follower] = []
    try:
        url = cluster.url(databases.create())
        admin = PgStore(url)
        key = admin.create_key(PRINCIPAL)[1]
        admin.write(PRINCIPAL, WriteRequest(content="first"))
        admin.close()
        for name, pooler in (("a", "none"), ("b", "none"), ("c", "transaction")):
            args = ("--database", url, "--database-pooler", pooler, "--workers", "4")
            servers.append(serve(None, root / f"pg-{name}", *args))
        followers = {}
        for name, srv in (("notify", servers[1]), ("slow poll", servers[2])):
            follower = Follower(srv.url, key, root / f"pg-client-{name}")
            clis.append(follower)
            if not follower.wait_for(1, 60):
                raise AssertionError(f"the {name} follower printed nothing")
            followers[name] = follower
        return across(servers[0].url, key, followers, writes)
    finally:
        for follower in clis:
            follower.stop()
        for srv in servers:
            srv.stop()
        databases.close()
        pg_helpers.stop_cluster(cluster)


def many_followers(srv: Server, keys: list[str], n: int, window: float, idle: list[Server]) -> dict[str, Any]:
    """Open `n` raw followers on `srv`; its RSS before and with them open; heartbeats and CPU over `window`.

    Over the same window, the access lines of each server in `idle` (each with one idle CLI follower)."""
    import httpx

    with httpx.Client(base_url=srv.url, headers={"X-Api-Key": keys[0]}) as client:  # warm: a write, a page
        client.post("/memory/write", json={"content": "warm"}).raise_for_status()
        client.post("/memory/recent", json={"limit": 20}).raise_for_status()
    time.sleep(1)
    before = srv.rss_kib()
    proc = subprocess.Popen(
        [sys.executable, "-c", FOLLOWERS_PROGRAM, srv.url, json.dumps(keys), str(n), str(window)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        opened_line = proc.stdout.readline().split()
        opened = int(opened_line[1]) if len(opened_line) > 1 else 0
        time.sleep(2)  # let the server settle with every stream open
        with_them = srv.rss_kib()
        cpu = srv.cpu_seconds()
        started, wall = time.monotonic(), time.time()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        result = json.loads(proc.stdout.readline())
        elapsed, wall_end = time.monotonic() - started, time.time()
        cpu = srv.cpu_seconds() - cpu
        end_rss = srv.rss_kib()
        time.sleep(0.5)  # the access log is written in batches (0.2 s)
        idle_requests = [s.requests_between(wall, wall_end) for s in idle]
        own_requests = srv.requests_between(wall, wall_end)
        fan = fan_out(srv, keys[0], proc)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return {
        "opened": opened,
        "rss_before_kib": before,
        "rss_with_kib": max(with_them, end_rss),
        "heartbeats": result["heartbeats"],
        "failures": result["n_failures"],
        "failure_samples": result["failures"],
        "window": elapsed,
        "cpu": cpu,
        "idle_requests": idle_requests,
        "own_requests": own_requests,
        **fan,
    }


def fan_out(srv: Server, key: str, proc: subprocess.Popen[str], writes: int = FAN_WRITES) -> dict[str, Any]:
    """`writes` writes, 0.3–0.5 s apart, each waking every open follower: milliseconds from each write's answer
    to its entry reaching each stream (as one asyncio process reads them all), and the server's CPU a write."""
    import httpx

    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("fan\n")
    proc.stdin.flush()
    proc.stdout.readline()  # `fanning`
    acked: dict[str, float] = {}
    cpu = srv.cpu_seconds()
    with httpx.Client(base_url=srv.url, headers={"X-Api-Key": key}) as client:
        for i in range(writes):
            answer = client.post("/memory/write", json={"content": f"fan {i}"})
            acked[answer.json()["atom_id"]] = time.monotonic()
            time.sleep(random.uniform(0.3, 0.5))
    cpu = srv.cpu_seconds() - cpu
    proc.stdin.write("end " + json.dumps(list(acked)) + "\n")
    proc.stdin.flush()
    arrivals = json.loads(proc.stdout.readline())
    each = [(t - at) * 1000 for atom, at in acked.items() for t in arrivals.get(atom, [])]
    last = [(max(arrivals[atom]) - at) * 1000 for atom, at in acked.items() if atom in arrivals]
    return {
        "fan_each": each,
        "fan_last": last,
        "fan_delivered": len(each),
        "fan_writes": writes,
        "fan_cpu_ms": 1000 * cpu / writes,
    }


def run(quick: bool = False, followers: int = FOLLOWERS) -> list[dict[str, Any]]:
    import httpx

    writes = 200 if quick else 400
    window = 2 * HEARTBEAT + 1 if quick else 4 * HEARTBEAT + 1
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-follow-") as tmp:
        root = Path(tmp)
        (push_key,) = make_store(root / "push.db")
        (poll_key,) = make_store(root / "poll.db")
        keys = make_store(root / "many.db", keys=-(-followers // PER_KEY))
        servers: list[Server] = []
        clis: list[Follower] = []
        try:
            push = serve(root / "push.db", root / "push")
            servers.append(push)
            poll = serve_without_follow(root / "poll.db", root / "poll")
            servers.append(poll)
            pairs: dict[str, tuple[Any, Follower, str]] = {}
            for name, srv, key in (("push", push, push_key), ("poll", poll, poll_key)):
                follower = Follower(srv.url, key, root / f"client-{name}")
                clis.append(follower)
                pairs[name] = (srv, follower, key)
            # Each follower is following once it printed a first entry written after it started.
            for name, (srv, follower, key) in pairs.items():
                httpx.post(srv.url + "/memory/write", json={"content": "first"}, headers={"X-Api-Key": key})
                if not follower.wait_for(1, 60):
                    raise AssertionError(f"the {name} follower printed nothing")
            lat = latency(pairs, writes)
            for name in ("push", "poll"):
                early = sum(ms < 0 for ms in lat[name])  # read before the write's own answer arrived
                print(
                    f"[follow] {name}: p50 {statistics.median(lat[name]):.1f} ms, p99 {_pct(lat[name], 0.99):.1f} ms, "
                    f"{early} of {len(lat[name])} read before the write's answer",
                    file=sys.stderr,
                )
            bounds = ("--max-follows", str(followers), "--max-connections", str(followers + 200))
            many_server = serve(root / "many.db", root / "many", *bounds)
            servers.append(many_server)
            many = many_followers(many_server, keys, followers, window, [push, poll])
        finally:
            for follower in clis:
                follower.stop()
            for srv in servers:
                srv.stop()
        pg = postgres(root, writes // 2)
    load_end = os.getloadavg()
    push_p50, push_p99 = statistics.median(lat["push"]), _pct(lat["push"], 0.99)
    poll_p50, poll_p99 = statistics.median(lat["poll"]), _pct(lat["poll"], 0.99)
    poll_is = (
        "the same client and server without the follow route (404: the client polls, as against the hosted service)"
    )
    rows += [
        _row(
            f"follow latency p50, write answered → ndjson line read ({writes} writes)",
            push_p50,
            "ms",
            poll_p50,
            "≤ 50",
            poll_is,
        ),
        _row(f"follow latency p99 ({writes} writes)", push_p99, "ms", poll_p99, "≤ 250", poll_is),
    ]
    if pg is None:
        rows.append(
            _row("across servers on PostgreSQL: not measured (no PostgreSQL binaries)", None, "", None, "—", "")
        )
    else:
        slow = "the same writes, a follower on server C behind `--database-pooler transaction` (no LISTEN: the 1 s slow poll)"
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            rows.append(
                _row(
                    f"across servers on PostgreSQL, write on A → line on B (NOTIFY), {label} ({writes // 2} writes)",
                    _pct(pg["notify"], q),
                    "ms",
                    _pct(pg["slow poll"], q),
                    "—",
                    slow,
                )
            )
    per = many["window"] / HEARTBEAT
    hb = many["heartbeats"]
    push_idle, poll_idle = many["idle_requests"]
    rows += [
        _row(
            f"idle CLI follower (push): requests per {HEARTBEAT:g} s over {many['window']:.0f} s",
            push_idle / per,
            "req",
            poll_idle / per,
            "≤ 1",
            "the polling CLI follower over the same window (its server's access log)",
        ),
        _row(
            f"idle raw follower: heartbeats per {HEARTBEAT:g} s (mean of {len(hb)}; min {min(hb, default=0)}, max {max(hb, default=0)})",
            statistics.mean(hb) / per if hb else None,
            "events",
            None,
            "≤ 1",
            "",
        ),
        _row(
            f"{followers:,} idle followers ({many['opened']:,} open, {many['failures']} failed): server RSS added",
            (many["rss_with_kib"] - many["rss_before_kib"]) / 1024,
            "MB",
            many["rss_before_kib"] / 1024,
            "< 100",
            "the server's VmRSS before they opened (after a write and a page)",
        ),
        _row(
            f"{followers:,} followers woken by one write: its entry on each stream, p50 "
            f"({many['fan_delivered']:,} of {many['fan_writes'] * many['opened']:,} deliveries)",
            statistics.median(many["fan_each"]) if many["fan_each"] else None,
            "ms",
            push_p50,
            "—",
            "one CLI follower's p50 (above)",
        ),
        _row(
            f"{followers:,} followers woken by one write: the last stream to get it, p50 of {many['fan_writes']} writes",
            statistics.median(many["fan_last"]) if many["fan_last"] else None,
            "ms",
            None,
            "—",
            f"(max {max(many['fan_last'], default=0):.0f} ms; server CPU {many['fan_cpu_ms']:.0f} ms a write)",
        ),
        _row(
            f"{followers:,} idle followers: server CPU while idle ({many['own_requests']} access lines in the window)",
            100 * many["cpu"] / many["window"],
            "% of a core",
            None,
            "—",
            "",
        ),
    ]
    load = "load average (1, 5, 15 min) " + " ".join(f"{x:.2f}" for x in load_start) + " at the start, "
    load += " ".join(f"{x:.2f}" for x in load_end) + " at the end"
    print(f"[follow] {load}; {many['failure_samples']}", file=sys.stderr)
    return rows


def _row(name: str, value: float | None, unit: str, anchor: float | None, goal: str, anchor_is: str) -> dict[str, Any]:
    return {
        "name": name,
        "value": None if value is None else round(value, 2),
        "unit": unit,
        "anchor": None if anchor is None else round(anchor, 2),
        "ratio": round(value / anchor, 3) if value is not None and anchor else None,
        "goal": goal,
        "anchor_is": anchor_is,
    }


if __name__ == "__main__":
    from _report import machine, markdown

    started = " ".join(f"{x:.2f}" for x in os.getloadavg())
    # `--followers N`: fewer idle followers than the 1,000 of the goal (a look on a busy machine).
    many = int(sys.argv[sys.argv.index("--followers") + 1]) if "--followers" in sys.argv else FOLLOWERS
    got = run("--quick" in sys.argv, many)
    info = machine()
    info["load at start"] = started
    sys.stdout.write(markdown(got, [], info))
