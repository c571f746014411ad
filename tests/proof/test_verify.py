"""`mnemo verify`: every expected id once, no id twice; exit codes and JSON shapes through the console script."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.errors import CheckFailed, ValidationError
from mnemo_tui.proof import parse_expected, verify
from mnemo_tui.values.writes import WriteRequest
from tests.support.broken_backends import NeverEnds, RepeatsAcrossPages

Factory = Callable[..., Backend]


def write_many(backend: Backend, n: int, domain: str = "general") -> list[str]:
    return [backend.write(WriteRequest(content=f"entry {i}", domain=domain)).atom_id for i in range(n)]


def test_parse_expected_takes_plain_ids_ndjson_and_both_mixed() -> None:
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    text = f"{a}\n\n# a comment\n{json.dumps({'atom_id': b, 'content': 'x'})}\n  {c.upper()}  \n{a}\n"
    assert parse_expected(text) == [a, b, c]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("not-an-id", "is not an atom id"),
        ("{broken json", "is not valid JSON"),
        ('{"content": "no id"}', "without a string atom_id"),
        ('{"atom_id": 7}', "without a string atom_id"),
    ],
)
def test_parse_expected_names_the_bad_line(line: str, needle: str) -> None:
    with pytest.raises(ValidationError, match=needle) as caught:
        parse_expected(f"{uuid.uuid4()}\n{line}\n", "ids.txt")
    assert "ids.txt line 2" in caught.value.message


def test_verify_passes_when_every_expected_id_comes_back_once(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ids = write_many(backend, 250)
    result = verify(backend, ids)
    assert result.passed
    assert (result.expected, result.seen, result.missing, result.repeated) == (250, 250, (), ())
    assert result.pages == 3  # an endpoint streams the same pages of 100, a line each


def test_verify_fails_on_a_missing_id(make_backend: Factory) -> None:
    backend = make_backend("alice")
    ids = write_many(backend, 5)
    ghost = str(uuid.uuid4())
    result = verify(backend, [*ids, ghost])
    assert not result.passed
    assert result.missing == (ghost,) and result.repeated == ()
    assert result.wire() == {"passed": False, "expected": 6, "seen": 5, "missing": [ghost], "repeated": []}


def test_verify_fails_on_an_id_the_walk_returned_twice(local: LocalBackend) -> None:
    ids = write_many(local, 250)
    result = verify(RepeatsAcrossPages(local), ids)
    assert not result.passed
    assert result.missing == ()
    assert set(result.repeated) == {ids[150], ids[50]}  # the last entry of pages 1 and 2, newest first


def test_verify_walks_only_the_scope_and_since_it_is_given(make_backend: Factory) -> None:
    backend = make_backend("alice")
    old = write_many(backend, 3, "a")
    new = write_many(backend, 3, "b")
    assert verify(backend, new, scope="b").passed
    assert verify(backend, old, scope="b").missing == tuple(old)
    since = backend.get(new[1]).created_at
    result = verify(backend, new, since=since)
    assert result.missing == (new[0],) and result.seen == 2


def test_verify_stops_a_walk_that_hands_back_the_same_cursor(local: LocalBackend) -> None:
    write_many(local, 3)
    with pytest.raises(CheckFailed, match="looped"):
        verify(NeverEnds(local), [])


# -- through the installed console script -----------------------------------------------------


def cli_write(cli: Callable[..., Any], n: int, scope: str = "general") -> list[str]:
    ids = []
    for i in range(n):
        result = cli("write", f"entry {i}", "--scope", scope)
        assert result.code == 0, result.stderr
        ids.append(result.stdout.strip())
    return ids


def test_cli_verify_reads_stdin_and_prints_the_json_shape(cli: Callable[..., Any]) -> None:
    ids = cli_write(cli, 3)
    result = cli("verify", "--expect", "-", "--format", "json", input="\n".join(ids) + "\n")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {"passed": True, "expected": 3, "seen": 3, "missing": [], "repeated": []}


def test_cli_verify_reads_ndjson_of_recent_from_a_file(cli: Callable[..., Any], tmp_path: Path) -> None:
    cli_write(cli, 4, "work")
    dump = cli("recent", "--scope", "work", "--all", "--format", "ndjson")
    expect = tmp_path / "got.ndjson"
    expect.write_text(dump.stdout)
    result = cli("verify", "--expect", str(expect), "--scope", "work")
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("PASS") and "4 expected, 0 missing, 0 repeated" in result.stdout


def test_cli_verify_exits_one_listing_the_missing_id(cli: Callable[..., Any]) -> None:
    ids = cli_write(cli, 2)
    ghost = str(uuid.uuid4())
    result = cli("verify", "--expect", "-", "--format", "json", input="\n".join([*ids, ghost]))
    assert result.code == 1
    assert json.loads(result.stdout) == {"passed": False, "expected": 3, "seen": 2, "missing": [ghost], "repeated": []}
    table = cli("verify", "--expect", "-", input=ghost)
    assert table.code == 1
    assert table.stdout.startswith("FAIL") and f"missing   {ghost}" in table.stdout


def test_cli_verify_since_bounds_the_walk(cli: Callable[..., Any]) -> None:
    ids = cli_write(cli, 2)
    result = cli("verify", "--expect", "-", "--since", "2999-01-01", "--format", "json", input=ids[0])
    assert result.code == 1
    assert json.loads(result.stdout)["seen"] == 0


@pytest.mark.parametrize("kind", ["missing", "directory", "binary", "bad-line"])
def test_cli_verify_unreadable_expect_file_exits_two(cli: Callable[..., Any], tmp_path: Path, kind: str) -> None:
    target = tmp_path / "expect"
    if kind == "directory":
        target.mkdir()
    elif kind == "binary":
        target.write_bytes(b"\xff\xfe\x00garbage")
    elif kind == "bad-line":
        target.write_text("this is a table, not ids\n")
    result = cli("verify", "--expect", str(target))
    assert result.code == 2
    assert str(target) in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2
    assert result.stdout == ""


def test_cli_verify_needs_expect(cli: Callable[..., Any]) -> None:
    result = cli("verify")
    assert result.code == 2
    assert "--expect" in result.stderr


def test_cli_verify_on_a_full_disk_is_exit_6_said_plainly(cli: Callable[..., Any], tmp_path: Path) -> None:
    """Review #7: a stdout that cannot be written is local trouble (6), not an unreachable backend (5)."""
    import os
    import subprocess

    from tests.support.cli import MNEMO

    store = tmp_path / "s.db"
    atom = cli("--store", str(store), "write", "one").stdout.strip()
    (tmp_path / "ids").write_text(atom + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")} | {"MNEMO_HOME": str(tmp_path)}
    for fmt in ("table", "json"):
        with open("/dev/full", "w") as full:
            args = [MNEMO, "--store", str(store), "verify", "--expect", str(tmp_path / "ids"), "--format", fmt]
            proc = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, text=True, env=env, check=False)
        assert proc.returncode == 6, proc.stderr
        assert proc.stderr == "mnemo: cannot write the output: No space left on device\n"
