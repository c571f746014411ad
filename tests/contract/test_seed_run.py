"""The source document's verification run through the installed `mnemo`, and a catch-up killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.state.statedb import StateDB, StateKey
from mnemo_tui.values.writes import WriteRequest
from tests.conftest import MNEMO, CliResult

Cli = Callable[..., CliResult]


def test_ten_entries_limit_three_two_writes_after_the_first_page(cli: Cli) -> None:
    written = []
    for i in range(10):
        result = cli("write", f"entry {i}")
        assert result.code == 0, result.stderr
        written.append(result.stdout.strip())
    first = cli("recent", "--limit", "3", "--format", "json")
    assert first.code == 0, first.stderr
    page = json.loads(first.stdout)
    seen = [item["atom_id"] for item in page["items"]]
    newest = page["items"][0]["created_at"]
    late = [cli("write", f"late {i}").stdout.strip() for i in range(2)]
    pages = 1
    cursor = page["next_cursor"]
    while cursor:
        result = cli("recent", "--limit", "3", "--cursor", cursor, "--format", "json")
        assert result.code == 0, result.stderr
        page = json.loads(result.stdout)
        seen += [item["atom_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        pages += 1
    assert pages == 4
    assert seen == list(reversed(written))
    # The next pass, from the newest timestamp seen (inclusive), has the two new entries on top.
    after = cli("recent", "--limit", "3", "--since", newest, "--format", "ndjson")
    ids = [json.loads(line)["atom_id"] for line in after.stdout.splitlines()]
    assert ids == [*reversed(late), seen[0]]


def test_ndjson_page_puts_the_cursor_on_stderr_only(cli: Cli) -> None:
    for i in range(4):
        cli("write", f"entry {i}")
    result = cli("recent", "--limit", "3", "--format", "ndjson")
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(json.loads(line)["atom_id"] for line in lines)
    cursor_lines = [line for line in result.stderr.splitlines() if line.startswith("next_cursor: ")]
    assert len(cursor_lines) == 1
    rest = cli("recent", "--limit", "3", "--format", "ndjson", "--cursor", cursor_lines[0].split(": ", 1)[1])
    assert len(rest.stdout.splitlines()) == 1 and "next_cursor" not in rest.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["recent", "--limit", "0"],
        ["recent", "--limit", "101"],
        ["recent", "--cursor", "garbage!"],
        ["recent", "--since", "last tuesday"],
        ["recent", "--since", "2026-01-02", "--until", "2026-01-01"],
        ["recent", "--scope", "xroom:"],
        ["recent", "--format", "xml"],
        ["catchup", "--limit", "500"],
        ["write", ""],
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(cli: Cli, args: list[str]) -> None:
    result = cli(*args)
    assert result.code == 2, (result.code, result.stderr)
    assert result.stderr.strip()
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_cursor_with_other_scope_or_filters_exits_2(cli: Cli) -> None:
    for i in range(3):
        cli("write", f"entry {i}", "--scope", "ops")
    page = json.loads(cli("recent", "--scope", "ops", "--limit", "1", "--format", "json").stdout)
    cursor = page["next_cursor"]
    assert cli("recent", "--limit", "1", "--cursor", cursor).code == 2
    assert cli("recent", "--scope", "ops", "--since", "1d", "--limit", "1", "--cursor", cursor).code == 2
    assert cli("recent", "--scope", "ops", "--limit", "1", "--cursor", cursor).code == 0


def test_catchup_json_shape_and_exit_code(cli: Cli) -> None:
    ids = [cli("write", f"entry {i}").stdout.strip() for i in range(5)]
    first = cli("catchup", "--limit", "2", "--format", "json", "--exit-code")
    assert first.code == 0
    body = json.loads(first.stdout)
    assert [i["atom_id"] for i in body["items"]] == list(reversed(ids))
    assert body["pages"] == 3 and body["repeats_skipped"] == 0 and body["resumed"] is False
    assert body["watermark"]["before"] is None
    assert body["watermark"]["after"]["boundary_ids"] == [ids[-1]]
    assert body["empty_report"] is None and body["scope"] is None and body["consumer"] == "default"
    again = cli("catchup", "--format", "json", "--exit-code")
    assert again.code == 1
    body = json.loads(again.stdout)
    assert body["items"] == [] and body["repeats_skipped"] == 1
    assert body["empty_report"]["kind"] == "nothing_new"
    assert body["watermark"]["after"] == body["watermark"]["before"]


def test_empty_reports_say_what_they_covered(cli: Cli) -> None:
    table = cli("recent")
    assert table.code == 0 and "holds no entries yet" in table.stdout
    body = json.loads(cli("recent", "--format", "json").stdout)
    assert body["empty_report"]["kind"] == "empty_scope" and body["items"] == []
    nd = cli("recent", "--format", "ndjson")
    assert nd.stdout == "" and "holds no entries yet" in nd.stderr
    cli("write", "x")
    body = json.loads(cli("recent", "--until", "2000-01-01", "--format", "json").stdout)
    assert body["empty_report"]["kind"] == "no_match"


def make_store(home: Path, n: int) -> list[str]:
    backend = LocalBackend.open(home / "store.db", "local")
    rows = [(WriteRequest(content=f"bulk entry {i}\nsecond line", domain=f"d{i % 3}"), i) for i in range(n)]
    backend.engine.bulk_insert([("local", r, t) for r, t in rows])
    ids = [r[0] for r in backend.engine.db.execute("SELECT atom_id FROM atoms ORDER BY created_at DESC").fetchall()]
    backend.close()
    return ids


@pytest.mark.slow
def test_catchup_killed_mid_walk_then_resumed_outputs_everything(isolated_home: Path) -> None:
    ids = make_store(isolated_home, 3000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    proc = subprocess.Popen(
        [MNEMO, "catchup", "--limit", "10", "--format", "ndjson"], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    printed = []
    for _ in range(700):  # read some pages, then kill the process mid-walk
        line = proc.stdout.readline()
        if not line:
            break
        printed.append(json.loads(line)["atom_id"])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    printed += [json.loads(line)["atom_id"] for line in proc.stdout.read().splitlines() if line.strip()]
    assert 0 < len(printed) < len(ids)
    state = StateDB(isolated_home / "state.db")
    store_path = str((isolated_home / "store.db").resolve())
    assert state.load(StateKey(store_path, "local", "default", None)) is None  # the watermark did not move
    state.close()
    resumed = subprocess.run(
        [MNEMO, "catchup", "--limit", "10", "--format", "ndjson", "--resume"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    rest = [json.loads(line)["atom_id"] for line in resumed.stdout.splitlines()]
    # Nothing is lost; at most the page in flight when the process died is printed twice.
    assert set(printed) | set(rest) == set(ids)
    assert len(printed) + len(rest) - len(ids) <= 10
    state = StateDB(isolated_home / "state.db")
    mark = state.load(StateKey(store_path, "local", "default", None))
    assert mark is not None and mark.boundary_ids == (ids[0],)
    assert state.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    state.close()
    final = subprocess.run(
        [MNEMO, "catchup", "--format", "ndjson"], capture_output=True, text=True, env=env, check=False
    )
    assert final.stdout == ""


def test_recent_all_streams_every_entry_in_every_format(isolated_home: Path, cli: Cli) -> None:
    ids = make_store(isolated_home, 250)
    nd = cli("recent", "--all", "--format", "ndjson")
    assert [json.loads(line)["atom_id"] for line in nd.stdout.splitlines()] == ids
    body = json.loads(cli("recent", "--all", "--format", "json").stdout)
    assert [i["atom_id"] for i in body["items"]] == ids and body["next_cursor"] is None
    table = cli("recent", "--all")
    assert table.stdout.count("bulk entry") == 250
    assert sys.executable  # the console script ran in this test's environment
