"""Tests that `mnemo recent` stays cheap to start: what it imports, and the Typer-free fast path it takes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mnemo_tui.cli as cli_main
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest

HEAVY = (
    "textual",
    "httpx",
    "httpcore",  # the remote backend's transport (backends/remote_http.py)
    "msgspec",  # the remote feed's page reader (backends/remote_wire.py)
    "keyring",
    "starlette",
    "uvicorn",
    "pydantic",
    "typer",
    "rich",
    "nacl",
    "difflib",
    "tomlkit",
    "psycopg",
    "psycopg_pool",
    "mcp",
    "mcp_types",
    "jsonschema",
    "Stemmer",  # the search's stemmer (engine/fts.py): searches and writes only
)

PROBE = """
import io, json, sys
from contextlib import redirect_stdout
sys.argv = ["mnemo", *json.loads(sys.argv[1])]
from mnemo_tui.cli import main
with redirect_stdout(io.StringIO()) as out:
    code = main()
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def probe(home: Path, *args: str) -> dict[str, object]:
    env = {"MNEMO_HOME": str(home), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True, env=env, check=True
    )
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


def heavy_in(modules: object) -> list[str]:
    assert isinstance(modules, list)
    return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


@pytest.fixture
def filled(isolated_home: Path) -> Path:
    store = Store(isolated_home / "store.db")
    for i in range(30):
        store.write("local", WriteRequest(f"entry {i}"))
    store.close()
    return isolated_home


@pytest.mark.parametrize(
    "args",
    [
        ("recent", "--limit", "20", "--format", "ndjson"),
        ("recent",),
        ("recent", "--all", "--format", "json"),
        ("recent", "--scope", "general", "--since", "1h", "--format", "ndjson"),
        ("catchup", "--format", "ndjson"),
    ],
)
def test_recent_on_the_embedded_store_imports_nothing_heavy(filled: Path, args: tuple[str, ...]) -> None:
    result = probe(filled, *args)
    assert result["code"] == 0
    assert result["out"]
    assert heavy_in(result["modules"]) == []


def test_recent_on_an_empty_store_imports_nothing_heavy(isolated_home: Path) -> None:
    result = probe(isolated_home, "recent")
    assert result["code"] == 0 and "holds no entries yet" in str(result["out"])
    assert heavy_in(result["modules"]) == []


def test_the_engine_imports_no_uuid_secrets_or_typer_to_read_a_page(filled: Path) -> None:
    modules = probe(filled, "recent", "--limit", "5", "--format", "ndjson")["modules"]
    assert isinstance(modules, list)
    assert "uuid" not in modules and "secrets" not in modules and "mnemo_tui.state.statedb" not in modules


def test_recent_names_its_files_without_pathlib(filled: Path) -> None:
    # os.path is all the settings and the store file need; pathlib would bring urllib.parse and ipaddress.
    modules = probe(filled, "recent", "--limit", "20", "--format", "ndjson")["modules"]
    assert isinstance(modules, list)
    assert "pathlib" not in modules and "urllib.parse" not in modules and "ipaddress" not in modules


def test_other_commands_go_through_typer(filled: Path) -> None:
    result = probe(filled, "search", "entry", "--format", "ndjson")
    assert result["code"] == 0 and "typer" in heavy_in(result["modules"])
    assert "textual" not in heavy_in(result["modules"])
    assert "nacl" not in heavy_in(result["modules"])  # the crypto library is the vault commands' own


def test_only_the_commands_that_seal_or_unseal_import_the_crypto_library(filled: Path) -> None:
    listed = probe(filled, "vault", "list", "--format", "json")
    assert listed["code"] == 0 and "nacl" not in heavy_in(listed["modules"])
    assert "mnemo_tui.state.sealing" not in listed["modules"]  # type: ignore[operator]
    demo = probe(filled, "demo", "--entries", "10", "--force")
    assert demo["code"] == 0 and "nacl" in heavy_in(demo["modules"])


@pytest.mark.parametrize(
    "args",
    [
        ["recent", "--help"],
        ["recent", "-n5"],
        ["recent", "--bogus"],
        ["recent", "stray"],
        ["recent", "--limit", "-1"],
        ["recent", "--limit", "x"],
        ["recent", "--all=yes"],
        ["recent", "--scope"],
        ["recent", "--", "--all"],
        ["catchup", "--help"],
        ["catchup", "--until", "now"],
        ["search", "x"],
        ["--version", "--bogus"],
        ["--store"],
        [],
    ],
)
def test_anything_unusual_falls_through_to_typer(args: list[str]) -> None:
    assert cli_main._fast(args) is None


def run_both(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    fast_code = cli_main.main(args)
    fast = capsys.readouterr()
    with monkeypatch.context() as m:
        m.setattr(cli_main, "_fast", lambda _args: None)
        slow_code = cli_main.main(args)
        slow = capsys.readouterr()
    return (fast_code, fast.out, fast.err), (slow_code, slow.out, slow.err)


@pytest.mark.parametrize(
    "args",
    [
        ["recent", "--limit", "7", "--format", "json"],
        ["recent", "-n", "3", "-f", "ndjson", "--scope", "general", "--since", "2020-01-01"],
        ["recent", "--all", "--format=ndjson", "--include-history"],
        ["recent", "--limit", "0"],
        ["recent", "--since", "yesterday", "--until", "2000-01-01"],
        ["recent", "--scope", "xroom:nope"],
        ["recent", "--format", "yaml"],
        ["--store", "{home}/store.db", "recent", "-f", "json"],
        ["recent", "-f", "json", "--store", "{home}/store.db", "-n", "2"],
        ["recent", "--store={home}/store.db", "--utc", "-f", "ndjson"],
        ["recent", "-f", "json", "--endpoint", "ftp://not-http"],
        ["recent", "--exclude-author", "local", "-f", "json"],
    ],
)
def test_the_fast_path_answers_exactly_as_the_typer_command(
    filled: Path, args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [a.replace("{home}", str(filled)) for a in args]
    fast, slow = run_both(args, capsys, monkeypatch)
    assert fast == slow
    assert fast[0] in (0, 2)


def test_catchup_through_either_path_commits_the_same_way(
    filled: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli_main.main(["catchup", "--format", "json", "--consumer", "fast"]) == 0
    fast = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(cli_main, "_fast", lambda _args: None)
    assert cli_main.main(["catchup", "--format", "json", "--consumer", "slow"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert fast["items"] == slow["items"] and len(fast["items"]) == 30
    assert fast["watermark"]["after"]["created_at"] == slow["watermark"]["after"]["created_at"]
    assert cli_main.main(["catchup", "--consumer", "fast", "--exit-code", "-f", "ndjson"]) == 1


def command_modules(result: dict[str, object]) -> set[str]:
    modules = result["modules"]
    assert isinstance(modules, list)
    return {m for m in modules if m.startswith("mnemo_tui.cli.cmd_")}


def test_a_commands_help_imports_that_commands_module_alone(filled: Path) -> None:
    # The lazy group (mnemo_tui/cli/app.py) builds only the command asked for; `mnemo --help` none at all.
    assert command_modules(probe(filled, "show", "--help")) == {"mnemo_tui.cli.cmd_atoms"}
    listed = probe(filled, "--help")
    assert "show" in str(listed["out"]) and "Copy an embedded store into PostgreSQL." in str(listed["out"])
    assert command_modules(listed) == set()


def test_the_remote_backend_loads_no_state_database_until_a_call_needs_one() -> None:
    # A remote walk reads pages only: the consumers' and removals' calls (and the state database, sqlite3, the
    # migrations they bring) load when called, which a walk never does; their 404 rule stays theirs.
    code = "import json, sys, mnemo_tui.backends.remote; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(json.loads(proc.stdout))
    assert not modules & {"sqlite3", "mnemo_tui.state.statedb", "mnemo_tui.backends.remote_consumers"}
    assert "mnemo_tui.backends.remote_removals" not in modules

    from mnemo_tui.backends import remote_calls, remote_consumers, remote_removals

    assert {remote_consumers.PATH, remote_removals.PATH} <= set(remote_calls._MAY_BE_404)
