"""Provides what the reliability, security, fuzz and load tests share: real processes, a real server, invariants.

Run as a script it is a worker process (`writer`, `consumer`, `superseder`) that the tests start
and kill; imported it gives the tests the same code plus the checks they assert.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
PYTHON = sys.executable
MNEMO = shutil.which("mnemo", path=str(Path(sys.executable).parent)) or "mnemo"


# -- environments -------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a process reads and writes: the embedded store, or a `mnemo serve` endpoint with a key."""

    kind: str  # "embedded" or "remote"
    store: Path  # the store file (served by the server when remote)
    endpoint: str | None = None
    key: str | None = None
    principal: str = "alice"

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """A clean environment for a mnemo process acting as this target's principal."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
        env["MNEMO_HOME"] = str(home)
        env["NO_COLOR"] = "1"
        if self.kind == "remote":
            assert self.endpoint and self.key
            env["MNEMO_ENDPOINT"] = self.endpoint
            env["MNEMO_API_KEY"] = self.key
        else:
            env["MNEMO_STORE"] = str(self.store)
            env["MNEMO_PRINCIPAL"] = self.principal
        env.update(extra)
        return env

    def args(self) -> list[str]:
        """The worker command-line arguments that select this target."""
        out = ["--store", str(self.store), "--principal", self.principal]
        if self.kind == "remote":
            assert self.endpoint and self.key
            out += ["--endpoint", self.endpoint, "--key", self.key]
        return out


def open_target_backend(store: str, principal: str, endpoint: str | None, key: str | None):  # type: ignore[no-untyped-def]
    """The backend the CLI itself would open for these settings (so both backends go through one path)."""
    from mnemo_tui.cli.context import open_backend
    from mnemo_tui.state.config import resolve

    env = {"MNEMO_HOME": os.environ.get("MNEMO_HOME", "/nonexistent")}
    if endpoint:
        env["MNEMO_ENDPOINT"] = endpoint
        env["MNEMO_API_KEY"] = key or ""
    else:
        env["MNEMO_STORE"] = store
        env["MNEMO_PRINCIPAL"] = principal
    return open_backend(resolve(env=env))


def run_cli(
    env: dict[str, str], *args: str, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the installed `mnemo` with this environment."""
    return subprocess.run(
        [MNEMO, *args], input=input, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


def integrity(path: Path) -> str:
    """`PRAGMA integrity_check` of a SQLite file ("ok" when sound)."""
    db = sqlite3.connect(path)
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


def read_lines(path: Path) -> list[str]:
    """Complete lines of a file a killed process was writing (a torn last line was never output)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    return [line for line in lines[:-1] if line]  # the part after the last newline is torn or empty


def ndjson_ids(path: Path) -> list[str]:
    """The atom ids of the complete NDJSON lines of a file."""
    return [json.loads(line)["atom_id"] for line in read_lines(path)]


def kill9(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGKILL a process we started and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def all_entries(store: Path, scope_bucket_sql: str = "") -> list[tuple[int, str, str | None]]:
    """(created_at, atom_id, superseded_by) of every entry of a store file, read directly."""
    db = sqlite3.connect(store)
    try:
        return [(r[0], r[1], r[2]) for r in db.execute("SELECT created_at, atom_id, superseded_by FROM atoms")]
    finally:
        db.close()


# -- a real `mnemo serve` -------------------------------------------------------------------


# The line `mnemo serve` prints once its socket is bound: with `--port 0` the OS picks the port and
# this line names it, so no port is chosen here, released, then raced for by another test process.
READY = re.compile(r"ready at (http://\S+/api/v1)")


@dataclass
class Server:
    """A `mnemo serve` subprocess on a loopback port, with its log file."""

    store: Path
    home: Path
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def target(self, principal: str = "alice") -> Target:
        return Target("remote", self.store, endpoint=self.base, key=self.keys[principal], principal=principal)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill9(self.proc)


def make_key(store: Path | Any, principal: str) -> str:
    """Issue an API key for a principal on a store, or a conftest `Target` (the engine call behind `mnemo keys create`)."""
    from mnemo_tui.engine.sqlite.store import Store

    s = store.open() if hasattr(store, "engine") else Store(store)
    try:
        return s.create_key(principal)[1]
    finally:
        s.close()


def start_server(store: Path | Any, home: Path, principals: tuple[str, ...] = ("alice",)) -> Server:
    """Start `mnemo serve` on a loopback port the OS picks over `store` (or a conftest `Target`: a
    PostgreSQL database too), with a key per principal; wait until it names its port and is healthy."""
    import urllib.request

    keys = {p: make_key(store, p) for p in principals}
    fd, log_name = tempfile.mkstemp(prefix="serve-", suffix=".log", dir=home)
    log = Path(log_name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    where = "MNEMO_DATABASE_URL" if getattr(store, "engine", "sqlite") == "postgres" else "MNEMO_STORE"
    env.update({"MNEMO_HOME": str(home), where: str(getattr(store, "location", store)), "NO_COLOR": "1"})
    with os.fdopen(fd, "wb") as fh:
        proc = subprocess.Popen(
            [MNEMO, "serve", "--host", "127.0.0.1", "--port", "0"], stdout=fh, stderr=subprocess.STDOUT, env=env
        )
    server = Server(store=store, home=home, port=0, proc=proc, log=log, keys=keys)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mnemo serve exited with {proc.returncode}: {server.log_text()[-2000:]}")
        if not server.port:
            ready = READY.search(server.log_text())
            if ready is None:
                time.sleep(0.05)
                continue
            server.port = int(urllib.parse.urlsplit(ready.group(1)).port or 0)
        try:
            with urllib.request.urlopen(server.base + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return server
        except OSError:
            time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"mnemo serve did not become healthy in 60 s: {server.log_text()[-2000:]}")


@contextlib.contextmanager
def serving(store: Path, home: Path, principals: tuple[str, ...] = ("alice",)) -> Iterator[Server]:
    """A running server for the duration of a block."""
    server = start_server(store, home, principals)
    try:
        yield server
    finally:
        server.stop()


# -- invariants ---------------------------------------------------------------------------


def supersession_consistent(store: Path) -> list[str]:
    """Every way the store's supersession links disagree (empty when all-or-nothing held)."""
    db = sqlite3.connect(store)
    try:
        rows = {r[0]: (r[1], r[2]) for r in db.execute("SELECT atom_id, supersedes, superseded_by FROM atoms")}
    finally:
        db.close()
    problems = []
    for atom, (supersedes, superseded_by) in rows.items():
        for old in json.loads(supersedes or "[]"):
            if old in rows and rows[old][1] != atom:
                problems.append(f"{atom} supersedes {old} but {old}.superseded_by = {rows[old][1]}")
        if superseded_by is not None:
            if superseded_by not in rows:
                problems.append(f"{atom} superseded by missing {superseded_by}")
            elif atom not in json.loads(rows[superseded_by][0] or "[]"):
                problems.append(f"{atom} superseded by {superseded_by}, which does not list it")
    return problems


# -- processes racing a consumer's passes --------------------------------------------------

# The opening of a script run beside a consumer that counts its passes in a file (`Passes.start`): argv 1 to 3
# are a conftest `Target`'s engine and location and that file, the script's own arguments follow. `engine` is
# the target opened; `wait_for_a_pass(seen)` waits for a pass after `seen` (at most 30 s: the consumer may have
# finished its loop), so writes and passes interleave whatever the machine's speed.
BESIDE_PASSES = """
import sys, threading
from pathlib import Path
from mnemo_tui.values.writes import WriteRequest
engine_kind, location, passes = sys.argv[1], sys.argv[2], Path(sys.argv[3])
if engine_kind == "postgres":
    from mnemo_tui.engine.postgres.store import PgStore
    engine = PgStore(location)
else:
    from mnemo_tui.engine.sqlite.store import Store
    engine = Store(location)

def passes_now():
    try:
        return int(passes.read_text() or 0)
    except (OSError, ValueError):
        return 0

def wait_for_a_pass(seen):
    for _ in range(3000):
        if passes_now() > seen:
            return
        threading.Event().wait(0.01)
"""


class Passes:
    """A consumer's passes counted in the file `path`, for the processes started beside it to wait for."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("0")

    def start(self, script: str, target: Any, *args: str) -> subprocess.Popen[str]:
        """`script` (opened by `BESIDE_PASSES`) in a process of its own on a conftest `Target`, stdout and stderr piped."""
        return subprocess.Popen(
            [PYTHON, "-c", BESIDE_PASSES + script, target.engine, str(target.location), str(self.path), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, one_pass: Callable[[], None], producers: list[subprocess.Popen[str]], most: int) -> int:
        """Passes, each counted in the file, until every producer has exited (bounded: `most` - 1 of them), then
        one more after the last write: how many were counted."""
        count = 0
        for count in range(1, most):
            one_pass()
            self.path.write_text(str(count))
            if all(p.poll() is not None for p in producers):
                break
        one_pass()
        return count


# -- worker processes ---------------------------------------------------------------------


def _writer(args: argparse.Namespace) -> None:
    """Write `count` entries alternating between an own domain and a room; log `scope\\tatom_id` per write."""
    from mnemo_tui.values.writes import WriteRequest

    backend = open_target_backend(args.store, args.principal, args.endpoint, args.key)
    rng = random.Random(args.seed)
    with open(args.out, "a", encoding="utf-8") as out:
        for i in range(args.count):
            in_room = args.room and i % 2 == 1
            domain = args.room if in_room else args.domain
            result = backend.write(WriteRequest(content=f"{args.domain} entry {i}", domain=domain, client_env="test"))
            out.write(f"{args.room if in_room else ''}\t{result.atom_id}\n")
            out.flush()
            if args.pause:
                time.sleep(rng.uniform(0, args.pause))
    backend.close()


def _consumer(args: argparse.Namespace) -> None:
    """Run catch-up passes over each scope until the stop file appears, then one last pass each.

    `--via lib` walks with the library (`CatchUp`); `--via cli` runs `mnemo catchup` for each pass.
    Every delivered id is logged as `scope\\tatom_id`.
    """
    scopes = [s or None for s in args.scopes.split(",")]
    stop = Path(args.stop)
    out_path = Path(args.out)
    home = Path(os.environ["MNEMO_HOME"])
    target = Target(
        "remote" if args.endpoint else "embedded", Path(args.store), args.endpoint, args.key, args.principal
    )

    def lib_pass(scope: str | None) -> list[str]:
        from mnemo_tui.catchup.catchup import CatchUp
        from mnemo_tui.state.statedb import StateDB

        backend = open_target_backend(args.store, args.principal, args.endpoint, args.key)
        state = StateDB(home / "state.db")
        got: list[str] = []
        try:
            CatchUp(backend, state, consumer=args.consumer, scope=scope, limit=args.limit, overlap=args.overlap).run(
                lambda entries: got.extend(e.atom_id for e in entries)
            )
        finally:
            state.close()
            backend.close()
        return got

    def cli_pass(scope: str | None) -> list[str]:
        argv = ["catchup", "--consumer", args.consumer, "--limit", str(args.limit), "--format", "ndjson"]
        if scope:
            argv += ["--scope", scope]
        proc = run_cli(target.env(home), *argv)
        if proc.returncode != 0:
            raise SystemExit(f"catchup failed ({proc.returncode}): {proc.stderr}")
        return [json.loads(line)["atom_id"] for line in proc.stdout.splitlines() if line]

    one_pass = cli_pass if args.via == "cli" else lib_pass
    passes = 0
    Path(str(out_path) + ".ready").touch()  # the test starts the writers only once every consumer is here
    with open(out_path, "a", encoding="utf-8") as out:
        while True:
            final = stop.exists()
            for scope in scopes:
                for atom in one_pass(scope):
                    out.write(f"{scope or ''}\t{atom}\n")
                out.flush()
            passes += 1
            if final:
                break
    Path(str(out_path) + ".passes").write_text(str(passes))


def _superseder(args: argparse.Namespace) -> None:
    """Forever: write a group of entries, then one entry superseding the whole group (killed from outside)."""
    from mnemo_tui.values.writes import WriteRequest

    backend = open_target_backend(args.store, args.principal, args.endpoint, args.key)
    if args.freeze_in_tx:
        # Embedded only: once the superseding write of group N is inside its transaction (the new
        # entry inserted, the old ones not yet marked), say so and stop there, to be killed.
        freeze = Path(args.freeze_in_tx)
        seen = {"superseding": 0, "updates": 0}

        def trace(sql: str) -> None:
            if sql.startswith("BEGIN"):
                seen["updates"] = 0
            elif sql.startswith("UPDATE atoms SET superseded_by"):
                if seen["updates"] == 0:
                    seen["superseding"] += 1
                seen["updates"] += 1
                # Freeze before the (freeze_after + 1)th old entry is marked: `freeze_after` already are.
                if seen["superseding"] == args.freeze_at and seen["updates"] == args.freeze_after + 1:
                    freeze.touch()
                    time.sleep(3600)

        backend.engine.db.set_trace_callback(trace)
    i = 0
    while True:
        group = [
            backend.write(WriteRequest(content=f"draft {i}.{j}", domain="drafts", client_env="test")).atom_id
            for j in range(args.group)
        ]
        backend.write(WriteRequest(content=f"final {i}", domain="drafts", supersedes=tuple(group), client_env="test"))
        i += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tests/support/reliability.py")
    parser.add_argument("role", choices=["writer", "consumer", "superseder"])
    parser.add_argument("--store", required=True)
    parser.add_argument("--principal", default="alice")
    parser.add_argument("--endpoint")
    parser.add_argument("--key")
    parser.add_argument("--out", default=os.devnull)
    parser.add_argument("--domain", default="general")
    parser.add_argument("--room", default="")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--consumer", default="default")
    parser.add_argument("--scopes", default="")
    parser.add_argument("--stop", default="")
    parser.add_argument("--via", choices=["lib", "cli"], default="lib")
    parser.add_argument("--limit", type=int, default=7)
    parser.add_argument("--overlap", type=int, default=0)
    parser.add_argument("--group", type=int, default=32)
    parser.add_argument("--freeze-in-tx", default="", help="superseder: a file to touch when frozen mid-transaction")
    parser.add_argument("--freeze-at", type=int, default=1, help="superseder: freeze inside the Nth superseding write")
    parser.add_argument("--freeze-after", type=int, default=0, help="superseder: ... once this many olds are marked")
    args = parser.parse_args(argv)
    {"writer": _writer, "consumer": _consumer, "superseder": _superseder}[args.role](args)


if __name__ == "__main__":
    main()
