"""Shared fixtures: an isolated MNEMO_HOME per test, real stores, and the installed `mnemo` in a subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from tests.support.cli import MNEMO, CliResult, on_terminal
from tests.support.targets import BACKENDS, Target

# CI derandomizes: the same examples on every run, so a red CI means a regression, never chance.
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "dev",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# A shell without job control starts background commands with SIGINT ignored, and an ignored
# signal stays ignored across exec: the processes the tests interrupt with ^C (SIGINT) would never
# see it. Handled here, it is back to its default in every child (a handler does not survive exec).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Under CI=true a skip is a failure: a missing tool (PostgreSQL, tmux, jq, openssl) or file must turn
# CI red, never shrink the suite quietly. A test marked `may_skip_in_ci` names why the machine itself
# may lack what it needs; its skip stays a skip and `-ra` reports it in the summary.
CI = os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not (CI and report.skipped) or hasattr(report, "wasxfail") or item.get_closest_marker("may_skip_in_ci"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true, which allows no skip (install what it needs): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A module skipped whole as it is collected (`pytest.importorskip`) fails under CI=true too."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if CI and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which allows no skip (install what it needs): {reason}"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the developer's own config, state, store and keys out of every test."""
    for name in list(os.environ):
        if name.startswith("MNEMO_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("MNEMO_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    return home


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateDB]:
    s = StateDB(tmp_path / "state.db")
    yield s
    s.close()


@pytest.fixture
def local(store: Store) -> LocalBackend:
    """A backend over the temporary store, acting as principal `local`."""
    return LocalBackend(store, "local")


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[Any]:
    """This test process's PostgreSQL cluster (started on first use) and its factory of fresh databases."""
    from tests.support import pg

    if pg.binaries() is None:
        pytest.skip(pg.NO_POSTGRES)
    cluster = pg.start_cluster()
    databases = pg.Databases(cluster)
    try:
        yield databases
    finally:
        pg.stop_cluster(cluster, databases)


@pytest.fixture(scope="session")
def pg_bouncer(pg_databases: Any) -> Iterator[Any]:
    """pgbouncer in transaction mode in front of this test process's cluster (started on first use)."""

    from tests.support import pg

    if shutil.which("pgbouncer") is None and not Path("/usr/sbin/pgbouncer").exists():
        pytest.skip(pg.NO_PGBOUNCER)
    bouncer = pg.start_bouncer(pg_databases.cluster)
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def targets(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], Target]]:
    """A factory of fresh targets of one engine (parametrized over both): `targets(name)`."""
    made: list[str] = []
    databases = request.getfixturevalue("pg_databases") if request.param == "postgres" else None

    def make(name: str = "store") -> Target:
        if databases is None:
            return Target("sqlite", tmp_path / f"{name}.db")
        made.append(databases.create())
        return Target("postgres", databases.cluster.url(made[-1]))

    yield make
    for name in made:
        assert databases is not None
        databases.drop(name)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def module_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """One fresh target of each engine (parametrized) for a whole module's tests."""
    if request.param == "sqlite":
        yield Target("sqlite", tmp_path_factory.mktemp("module") / "store.db")
        return
    databases = request.getfixturevalue("pg_databases")
    name = databases.create()
    yield Target("postgres", databases.cluster.url(name))
    databases.drop(name)


@pytest.fixture
def target(targets: Callable[[str], Target]) -> Target:
    """One fresh target of the parametrized engine."""
    return targets("store")


@pytest.fixture(params=BACKENDS)
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], Backend]]:
    """A factory of backends over one fresh store, one per principal; parametrized over backend kinds
    (in this process or through `mnemo serve`) and engines (the embedded store, PostgreSQL, and
    `bouncer`: PostgreSQL behind pgbouncer in transaction mode, which a module asks for by
    parametrizing `make_backend` itself with `BACKENDS + ["remote-bouncer"]`).

    Every backend it returns shares the same store, so principals can meet in rooms.
    """
    kind, _, engine = str(request.param).partition("-")
    opened: list[Backend] = []
    made: list[str] = []
    if engine in ("pg", "bouncer"):
        databases = request.getfixturevalue("pg_databases")
        made.append(databases.create())
        front = request.getfixturevalue("pg_bouncer") if engine == "bouncer" else databases.cluster
        where = Target("postgres", front.url(made[0]))
    else:
        where = Target("sqlite", tmp_path / "contract.db")
    if kind == "local":

        def factory(principal: str = "local") -> Backend:
            backend = LocalBackend(where.open(), principal)
            opened.append(backend)
            return backend

        yield factory
    elif kind == "remote":
        # A real `mnemo serve` app on a loopback port; one API key per principal on the served store.
        from mnemo_tui.backends.remote import RemoteBackend
        from tests.support.wire import served_store

        admin = where.open()
        with served_store(where) as server:

            def remote_factory(principal: str = "local") -> Backend:
                _key_id, key = admin.create_key(principal)
                backend = RemoteBackend(server.url, key)
                opened.append(backend)
                return backend

            yield remote_factory
            for backend in opened:
                backend.close()
            opened.clear()
        admin.close()
    else:  # pragma: no cover - other kinds are added where they are built
        raise AssertionError(kind)
    for backend in opened:
        backend.close()
    for name in made:
        request.getfixturevalue("pg_databases").drop(name)


@pytest.fixture
def cli(isolated_home: Path) -> Callable[..., CliResult]:
    """Run the installed `mnemo` console script in a subprocess, with this test's MNEMO_HOME.

    Its keyring is a real one of this test's own (a file in MNEMO_HOME), never the developer's;
    `env=subprocess_env(None)` takes it away.
    """
    from tests.support.keyrings import subprocess_env

    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
        columns: int | None = None,
    ) -> CliResult:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k != "COLUMNS"}
        full_env.update(subprocess_env(isolated_home / "test-keyring.json"))
        full_env["MNEMO_HOME"] = str(isolated_home)
        full_env["NO_COLOR"] = "1"
        full_env.update(env or {})
        if columns is not None:
            full_env.setdefault("MNEMO_PAGER", "cat")
            return on_terminal([MNEMO, *args], columns=columns, input=input, env=full_env, timeout=timeout)
        proc = subprocess.run(
            [MNEMO, *args], input=input, capture_output=True, text=True, env=full_env, timeout=timeout, check=False
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def run_cli(
    isolated_home: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., CliResult]]:
    """Run `mnemo_tui.cli.main(argv)` in this process: the exit code and the two streams, as `cli` gives them.

    docs/cli.md's exit codes and two-line errors are made in `main`, outside the Typer app, so parsing,
    formatting and exit codes are tested here without a process start; what needs the real console
    script (start-up imports, the pager, a terminal, signals, another keyring) stays with `cli`.
    stdin is the `input` given (never a terminal); the keyring is the same file `cli`'s processes use.
    """
    import io
    import time

    import keyring

    from mnemo_tui.cli import main
    from tests.support.keyrings import ENV_FILE, FileKeyring

    monkeypatch.setenv(ENV_FILE, str(isolated_home / "test-keyring.json"))
    monkeypatch.delenv("COLUMNS", raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(FileKeyring())

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> CliResult:
        capfd.readouterr()  # what the test printed before is not this run's
        with monkeypatch.context() as scoped:
            for name, value in (env or {}).items():
                scoped.setenv(name, value)
            time.tzset()  # a TZ given is this run's local zone, as in a process of its own
            scoped.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8"))
            try:
                code = main(list(args))
            except SystemExit as exc:  # main returns its code; a stray exit is still reported as one
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        time.tzset()
        out, err = capfd.readouterr()
        return CliResult(code, out, err)

    yield run
    keyring.set_keyring(previous)
