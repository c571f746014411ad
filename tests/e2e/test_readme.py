"""Runs the README's Usage examples exactly as written, so they stay true."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mnemo_tui.state.config import resolve

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (scripts/setup-dev.sh installs it)"),
]


def usage_blocks(kind: str) -> list[str]:
    text = README.read_text()
    usage = text[text.index("\n## Usage\n") :]
    following = re.search(r"^## (?!Usage)", usage[10:], re.M)
    if following:
        usage = usage[: following.start() + 10]
    return [body for lang, body in BLOCK.findall(usage) if lang == kind]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_block(block: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Run a block as the README has it. Its server takes `$PORT`, a port free when picked: another
    test process may bind it first, and then `mnemo serve` says so and the block runs again on
    another port (a bounded retry; any other failure is returned at once)."""
    for _attempt in range(5):
        result = run_block_once(block, cwd, home, free_port())
        if "Address already in use" not in result.stderr:
            break
    return result


def run_block_once(block: str, cwd: Path, home: Path, port: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(
        MNEMO_HOME=str(home),
        NO_COLOR="1",
        PORT=str(port),
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
    )
    # A block that starts like a script sets its own shell options; the others stop at the first failure.
    argv = ["bash", str(cwd / "block.sh")] if block.startswith("#!") else ["bash", "-e", "-o", "pipefail", "-c", block]
    (cwd / "block.sh").write_text(block)
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        # Whatever the block left running (a server, if it failed half-way) goes with it.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def setup_line() -> str:
    """The README's first command: install, put `mnemo` on the PATH, run the main job."""
    text = README.read_text()
    section = text[text.index("\n## Set up on a fresh machine\n") : text.index("\n## Usage\n")]
    return BLOCK.findall(section)[0][1].strip()


ACTIVATE = ". .venv/bin/activate && "


def test_the_setup_line_installs_what_the_readme_uses_and_puts_mnemo_on_the_path() -> None:
    line = setup_line()
    install, _, main_job = line.partition(ACTIVATE)
    assert main_job == "mnemo demo && mnemo catchup --no-pager"  # run by the next test, after the install
    # Every command works after it: `all` is every extra (serve's, mcp's, --database's).
    assert "'.[all]'" in install
    extras = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(extras["all"]) == sorted(f"mnemo-tui[{name}]" for name in extras if name not in ("all", "dev"))
    joined = "\n".join(usage_blocks("sh"))
    assert "mnemo serve" in joined and ".venv/bin/activate" in README.read_text().split("## Usage")[0]


def test_the_usage_section_announces_the_tools_its_examples_use() -> None:
    text = README.read_text()
    usage = text[text.index("\n## Usage\n") :]
    intro = usage[: usage.index("\n### ")]
    joined = "\n".join(usage_blocks("sh"))
    for tool in ("jq", "curl"):
        assert re.search(rf"\b{tool}\b", joined) and f"`{tool}`" in intro, tool


def test_no_example_waits_without_a_bound() -> None:
    for block in usage_blocks("sh"):
        for line in block.splitlines():
            assert not re.match(r"\s*(until |while (true|:)\b)", line), f"an unbounded wait in the README: {line}"


def test_the_usage_section_has_the_promised_examples() -> None:
    blocks = usage_blocks("sh")
    assert len(blocks) >= 5
    joined = "\n".join(blocks)
    for needed in ("| jq", "mnemo catchup --consumer", "--cursor", "mnemo serve"):
        assert needed in joined


def test_every_shell_example_runs_in_order(tmp_path: Path, isolated_home: Path) -> None:
    home = isolated_home
    main_job = setup_line().partition(ACTIVATE)[2]
    done = run_block(main_job, tmp_path, home)  # the set-up line's main job, on the fresh default store
    assert done.returncode == 0 and "new entries for consumer 'default'" in done.stderr, done.stderr
    results = []
    for block in usage_blocks("sh"):
        result = run_block(block, tmp_path, home)
        assert result.returncode == 0, (
            f"README block failed:\n{block}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
        assert "Traceback" not in result.stderr
        results.append(result)
    first, jq_counts, paging, bot, server = results[:5]
    assert "Nothing new in your own store" in first.stdout and "xroom:room_" in first.stdout
    out = jq_counts.stdout.splitlines()
    assert re.match(r"^\s*\d+ \S+$", out[0]) and any(" failed: " in line for line in out)
    own = subprocess.run(
        ["mnemo", "recent", "--all", "--format", "ndjson"],
        capture_output=True,
        text=True,
        env={**os.environ, "MNEMO_HOME": str(home), "PATH": str(Path(sys.executable).parent)},
        check=True,
    )
    assert paging.stdout.strip().splitlines()[-1] == str(len(own.stdout.splitlines()))
    assert "new entries for build-bot" in bot.stdout and '"consumer": "build-bot"' not in bot.stdout
    assert "consumer" in bot.stdout and "ci" in bot.stdout
    again = run_block(usage_blocks("sh")[3], tmp_path, home)
    assert "nothing new since the last pass" in again.stdout
    atom, *rest = server.stdout.splitlines()
    assert len(atom) == 36 and rest == ["Nightly on main: 412 jobs, 0 red", "env"]


def test_the_configuration_example_means_what_it_says(isolated_home: Path) -> None:
    (block,) = usage_blocks("toml")
    tomllib.loads(block)
    home = isolated_home
    (home / "config.toml").write_text(block)
    env = {"MNEMO_HOME": str(home)}
    laptop = resolve(env=env)
    assert laptop.profile == "laptop" and laptop.consumer == "me"
    assert laptop.store_path is not None and Path(laptop.store_path) == Path("~/notes/mnemo.db").expanduser()
    team = resolve(profile="team", env=env)
    assert team.endpoint == "http://127.0.0.1:8765/api/v1" and team.consumer == "me-at-work"
