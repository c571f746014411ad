"""Usage errors (exit 2, docs/cli.md "Exit codes"): two lines, the flag the user typed named, bytes that are
not UTF-8, `-f` without a format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


@pytest.mark.parametrize(
    ("args", "needle", "help_of"),
    [
        (["recent", "--bogus"], "No such option: --bogus", "mnemo recent"),
        (["nosuchcommand"], "No such command 'nosuchcommand'", "mnemo"),
        (["recent", "--limit", "abc"], "'abc' is not a valid int", "mnemo recent"),
        (["vault", "add", "k1"], "Missing option '--context'", "mnemo vault add"),
        (["rooms", "invite", "r", "--max-uses", "x"], "--max-uses", "mnemo rooms invite"),
    ],
)
def test_usage_errors_are_two_lines(run_cli: Any, args: list[str], needle: str, help_of: str) -> None:
    r = run_cli(*args)
    assert r.code == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("mnemo: ") and needle in lines[0]
    assert lines[1] == f"Try '{help_of} --help' for help."
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["recent", "--limit", "101"], "mnemo: --limit must be between 1 and 100, got 101"),
        (["catchup", "-n", "0"], "mnemo: --limit must be between 1 and 100, got 0"),
        (["search", "x", "--limit", "501"], "mnemo: --limit must be between 1 and 500, got 501"),
    ],
)
def test_limit_errors_name_the_flag(run_cli: Any, args: list[str], message: str) -> None:
    r = run_cli(*args)
    assert r.code == 2 and r.stderr.strip() == message


def test_invite_errors_name_the_flags(demo: Any) -> None:
    r = demo("rooms", "invite", "build-fleet", "--max-uses", "0")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --max-uses must be between 1 and 1000, got 0"
    r = demo("rooms", "invite", "build-fleet", "--expires-days", "91")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --expires-days must be between 1 and 90, got 91"


def test_write_ref_error_names_the_flag(run_cli: Any) -> None:
    r = run_cli("write", "x", "--ref", "r" * 256)
    assert r.code == 2 and r.stderr.strip() == "mnemo: --ref must be 1 to 255 characters, got 256"


def test_write_repeat_limits_name_the_flags(run_cli: Any) -> None:
    concepts = [a for i in range(257) for a in ("--concept", f"c{i}")]
    r = run_cli("write", "x", *concepts)
    assert r.code == 2 and r.stderr.strip() == "mnemo: --concept repeats at most 256 times, got 257"
    olds = [a for i in range(33) for a in ("--supersedes", f"00000000-0000-0000-0000-{i:012d}")]
    r = run_cli("write", "x", *olds)
    assert r.code == 2 and r.stderr.strip() == "mnemo: --supersedes repeats at most 32 times, got 33"


def test_rooms_invite_with_a_malformed_address_is_a_usage_error(demo: Any) -> None:
    for room in ("xroom:", "xroom:bad"):
        r = demo("rooms", "invite", room)
        assert r.code == 2 and "a room address is xroom:room_" in r.stderr
    r = demo("rooms", "invite", "no-such-room-name")
    assert r.code == 4  # a well-formed name one is not in stays a 4, like an unknown room


def _raw(args: list[bytes], stdin: bytes, home: Path) -> tuple[int, str]:
    import os
    import subprocess

    from tests.support.cli import MNEMO
    from tests.support.keyrings import subprocess_env

    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update({"MNEMO_HOME": str(home), "NO_COLOR": "1", **subprocess_env(home / "test-keyring.json")})
    proc = subprocess.run([MNEMO.encode(), *args], input=stdin, capture_output=True, env=env, timeout=60, check=False)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        ([b"write", b"\xff\xfe bad"], b"", "mnemo: argument 2 ('"),
        ([b"recent", b"--scope", b"\xff"], b"", "mnemo: argument 3 ('"),
        ([b"write"], b"\xff\xfe bad", "mnemo: the input is not valid UTF-8 text"),
        ([b"vault", b"add", b"k", b"--context", b"c"], b"\xff\xfe", "mnemo: the input is not valid UTF-8 text"),
    ],
)
def test_invalid_utf8_is_a_usage_error(isolated_home: Path, args: list[bytes], stdin: bytes, message: str) -> None:
    code, err = _raw(args, stdin, isolated_home)
    assert code == 2 and err.startswith(message) and len(err.splitlines()) == 1
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["recent", "-f"], ["recent", "-f", "--all"], ["--utc", "recent", "-n", "5", "-f"]])
def test_recent_f_without_a_format_points_to_follow(run_cli: Cli, args: list[str]) -> None:
    r = run_cli(*args)
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == (
        "mnemo: -f is --format here and needs a value (table, json or ndjson); did you mean -F (follow)?\n"
    )
    assert run_cli("recent", "-f", "ndjson").code == 0  # -f stays --format
    assert "did you mean -F" not in run_cli("rooms", "list", "-f").stderr  # only where following exists
