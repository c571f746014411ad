"""The pager, pipes closed early, signals, a terminal's widths and the extras a command needs, through the installed console script
(what a new user hit that did the wrong thing: issue 35)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import MNEMO, STREAMS, fill, in_terminal, on_terminal, recorder, terminal_env
from tests.support.follow import Follower

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


def test_tui_without_a_terminal_says_so_and_exits_2(isolated_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    # The timeout only guards the test run; the assertion is the code and the message.
    proc = subprocess.run(
        [MNEMO, "tui"], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 2
    assert "mnemo tui needs a terminal" in proc.stderr
    assert "\x1b" not in proc.stderr and proc.stdout == ""


def test_a_pager_that_cannot_start_is_named_and_the_output_printed_without_it(cli: Cli, isolated_home: Path) -> None:
    fill(isolated_home, 5)
    shown = in_terminal(isolated_home, ["recent"], env={"PAGER": "/nonexistent/pager"})
    assert "could not be started" in shown and "/nonexistent/pager" in shown
    assert "entry 4" in shown and "entry 0" in shown
    # A catch-up through it still ends, and commits.
    in_terminal(isolated_home, ["catchup"], env={"PAGER": "/nonexistent/pager"})
    assert json.loads(cli("watermark", "show", "-f", "json").stdout)["created_at"] is not None


def test_a_pager_quit_early_during_catchup_is_exit_7_and_moves_no_watermark(
    cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    fill(isolated_home, 3000)
    quitter = tmp_path / "quitter.sh"
    quitter.write_text("#!/bin/sh\nexit 0\n")  # a pager whose reader pressed q at once
    quitter.chmod(0o755)
    env = terminal_env(isolated_home, NO_COLOR="1", TERM="xterm", PAGER=str(quitter))
    run = on_terminal([MNEMO, "catchup"], env=env, terminal=("stdin", "stdout"), timeout=90)
    err = run.stderr
    assert run.code == 7, err
    assert "closed before the catch-up ended" in err and "Traceback" not in err
    assert cli("watermark", "show", "-f", "json").stdout == "null\n"


def _catchup_in_less(home: Path, turns: list[tuple[str, str]], rows: int = 30) -> tuple[int, str]:
    """`mnemo catchup` on a pseudo-terminal `rows` high, in the default pager (less); each of `turns`
    (shown, keys) types its keys once `shown` is on the screen. Returns the exit code and all shown."""
    env = terminal_env(home, NO_COLOR="1", TERM="xterm", LESSHISTFILE="-")
    env = {k: v for k, v in env.items() if k not in ("PAGER", "LESS")}
    pending = list(turns)
    run = on_terminal([MNEMO, "catchup"], env=env, rows=rows, terminal=STREAMS, turns=pending)
    assert not pending, run.stdout
    return run.code, run.stdout


@pytest.mark.skipif(not shutil.which("less"), reason="less is not installed")
def test_a_catchup_smaller_than_the_pipe_quit_in_less_after_one_screen_is_exit_7(cli: Cli, isolated_home: Path) -> None:
    # 59 entries are a few KiB: the whole pass fits the pager's pipe, so only the pager's reading can say.
    ids = fill(isolated_home, 59)
    code, shown = _catchup_in_less(isolated_home, [("entry 40", "q")])
    assert code == 7, shown
    assert "closed before the catch-up ended" in shown and "entry 0" not in shown
    assert cli("watermark", "show", "-f", "json").stdout == "null\n"
    # Read to the end (G shows the last screen, less says (END)), then q: the pass commits.
    code, shown = _catchup_in_less(isolated_home, [("entry 40", "G"), ("(END)", "q")])
    assert code == 0, shown
    assert "59 new entries" in shown and "watermark now" in shown
    mark = json.loads(cli("watermark", "show", "-f", "json").stdout)
    assert ids[-1] in mark["boundary_ids"]


def test_a_pager_that_reads_part_of_a_short_catchup_moves_no_watermark_and_one_reading_all_commits(
    cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    fill(isolated_home, 20)
    taken = tmp_path / "taken"
    partial = tmp_path / "partial.sh"
    partial.write_text(f'#!/bin/sh\nhead -n 5 > "{taken}"\n')  # reads five lines, then quits (exit 0)
    partial.chmod(0o755)
    shown = _in_terminal_code(isolated_home, ["catchup"], env={"MNEMO_PAGER": str(partial)})
    assert shown[0] == 7 and "closed before the catch-up ended" in shown[1]
    assert len(taken.read_text().splitlines()) == 5
    assert cli("watermark", "show", "-f", "json").stdout == "null\n"
    pager, seen = recorder(tmp_path, "pager")
    code, err = _in_terminal_code(isolated_home, ["catchup"], env={"MNEMO_PAGER": pager})
    assert code == 0 and "20 new entries" in err
    assert len(seen.read_text().splitlines()) == 21  # the header and every entry
    assert json.loads(cli("watermark", "show", "-f", "json").stdout)["created_at"] is not None


def _in_terminal_code(home: Path, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run mnemo with stdin and stdout on a pseudo-terminal and stderr piped; the exit code and stderr."""
    full = terminal_env(home, NO_COLOR="1", TERM="xterm", **env)
    run = on_terminal([MNEMO, *args], env=full, terminal=("stdin", "stdout"), timeout=90)
    return run.code, run.stderr


def test_catchup_into_a_closed_pipe_is_exit_7(isolated_home: Path) -> None:
    fill(isolated_home, 3000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    proc = subprocess.run(
        f'{MNEMO} catchup --format ndjson | head -n 2; echo "status ${{PIPESTATUS[0]}}"',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.stdout.splitlines()[-1] == "status 7", proc.stderr
    assert "closed before the catch-up ended" in proc.stderr


@pytest.mark.parametrize(
    ("missing", "args", "extra"),
    [
        ("psycopg", ["--database", "postgresql://u@127.0.0.1:9/db", "recent"], "postgres"),
        ("uvicorn", ["serve", "--port", "0"], "server"),
    ],
)
def test_a_missing_extra_is_named_with_exit_2(isolated_home: Path, missing: str, args: list[str], extra: str) -> None:
    # The package made unimportable exactly as in a venv without the extra.
    probe = "import sys; sys.modules[sys.argv[1]] = None; from mnemo_tui.cli import main; sys.exit(main(sys.argv[2:]))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    proc = subprocess.run(
        [sys.executable, "-c", probe, missing, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert (
        f"needs the {extra} extra, which is not installed here:" in proc.stderr and "internal error" not in proc.stderr
    )
    # The install it names is this copy's own (an editable checkout here), with the extra: never a PyPI name.
    assert f"-m pip install -e '{Path(__file__).parents[2]}[{extra}]'" in proc.stderr


def _pty_run(
    home: Path, command: str, *, columns: int, until: Callable[[str], bool], env: dict[str, str] | None = None
) -> str:
    """Run a shell command with stdin, stdout and stderr on one pseudo-terminal until `until(shown)` (bounded)."""
    full = terminal_env(home, NO_COLOR="1", TERM="xterm", **(env or {}))
    run = on_terminal(
        ["bash", "-c", command], env=full, columns=columns, terminal=STREAMS, until=until, new_session=True, timeout=120
    )
    return run.stdout.replace("\r\n", "\n")


def test_follow_on_a_store_that_does_not_exist_yet_sees_it_created(cli: Cli, isolated_home: Path) -> None:
    with Follower(isolated_home) as follow:
        assert cli("write", "the very first entry").code == 0
        follow.wait_for(lambda: follow.lines, "printed the first entry")
        assert json.loads(follow.lines[0])["content"] == "the very first entry"


def test_sigterm_ends_a_follower_at_once_without_a_word_as_tail_does(cli: Cli, isolated_home: Path) -> None:
    import signal

    assert cli("write", "one entry").code == 0
    with Follower(isolated_home) as follow:
        follow.wait_for(lambda: follow.lines, "printed the entry")
        follow.proc.send_signal(signal.SIGTERM)
        code, stderr = follow.ended()
    assert code == -signal.SIGTERM and stderr == ""  # a shell says 143 (docs/cli.md, "Exit codes and signals")


def test_follow_rows_that_arrive_later_fit_the_terminal_and_are_dated_as_the_first_page(isolated_home: Path) -> None:
    from mnemo_tui import timefmt
    from mnemo_tui.engine.sqlite.store import Store
    from mnemo_tui.values.writes import WriteRequest

    store = Store(isolated_home / "store.db")
    store.bulk_insert([("local", WriteRequest("an old one", "a"), timefmt.now_us() - 70_000_000)])
    store.close()
    ids: list[str] = []

    def later_writes(shown: str) -> bool:
        if "an old one" in shown and not ids:
            later = Store(isolated_home / "store.db")
            for n in range(3):
                request = WriteRequest(f"just now, entry {n} " + "x" * 80, f"a-much-longer-domain-{n}")
                ids.append(later.write("local", request).atom_id)
            later.close()
        return bool(ids) and all(i[:8] in shown for i in ids)

    shown = _pty_run(isolated_home, f"{MNEMO} recent --follow", columns=80, until=later_writes)
    rows = [r for r in shown.splitlines() if "entry " in r or "an old one" in r]
    assert len(rows) == 4
    from mnemo_tui import sanitize

    for row in rows:
        assert sanitize.cells(row) <= 80, row
    for atom_id in ids:
        assert any(row.endswith(atom_id[:8]) for row in rows)  # the id whole, on its own row
    # One form of time down the WHEN column: the first page's row (70 s old) dated as the later ones are.
    assert all(re.match(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d  ", row) for row in rows), rows


@pytest.mark.parametrize("columns", [45, 60, 69])
def test_a_narrow_table_keeps_a_short_id(cli: Cli, isolated_home: Path, columns: int) -> None:
    ids = fill(isolated_home, 3)
    rows = cli("recent", columns=columns).stdout.splitlines()[1:]
    assert [r[-8:] for r in rows] == [i[:8] for i in reversed(ids)]
    assert all(len(r) <= columns for r in rows)


def test_the_progress_line_is_erased_when_the_reader_stops_early(isolated_home: Path) -> None:
    fill(isolated_home, 4000)
    # stdout into `head`, stderr on the terminal: the first page (100 rows) fits the pipe's buffer, so the
    # count is always shown before the reader goes away; it must not be left behind.
    shown = _pty_run(isolated_home, f"{MNEMO} recent --all | head -n 2 > /dev/null", columns=100, until=lambda s: False)
    assert "so far" in shown
    assert shown.rfind("\x1b[K") > shown.rfind("so far")


def test_without_the_mcp_extra_the_message_names_the_extra_not_a_module_it_pulls_in(isolated_home: Path) -> None:
    # jsonschema (which the mcp extra brings) is the first import of `mnemo mcp` to fail without the extra.
    probe = (
        "import sys; sys.modules['jsonschema'] = None; sys.modules['mcp'] = None; "
        "from mnemo_tui.cli import main; sys.exit(main(['mcp']))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "mnemo mcp needs the mcp extra" in proc.stderr and "jsonschema" not in proc.stderr
