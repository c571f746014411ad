"""No output of any command, in any format, ever shows a vault value or an API key."""

from __future__ import annotations

import base64
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability_helpers import Target, make_key, run_cli

from mnemo_tui.cli import main

# Commands that run until stopped or need a terminal: covered elsewhere (the server's own tests below).
LONG_RUNNING = {("serve",), ("tui",), ("login",)}
FORMATS = ("table", "json", "ndjson")

# A value distinct enough (6+ different characters) that it cannot occur in an output by chance,
# the way a run of 16 dashes or box-drawing characters would in a table.
secret_values = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FFF, exclude_categories=("Cs",)), min_size=16, max_size=80
).filter(lambda v: len(set(v)) >= 6)


def _leaf_commands() -> list[tuple[str, ...]]:
    """Every command path the CLI registers (`("rooms", "list")`, `("write",)`, ...)."""
    import typer.main

    from mnemo_tui.cli.app import app

    root = typer.main.get_command(app)
    found: list[tuple[str, ...]] = []

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*path, name))
        elif path:
            found.append(path)

    walk(root, ())
    return found


class Leak(AssertionError):
    pass


class Session:
    """A fresh MNEMO_HOME with entries, a room with a second member, a key and one secret; runs `mnemo` in-process."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
        self.capsys = capsys
        self.monkeypatch = monkeypatch
        self.home = home
        self.outputs: list[tuple[tuple[str, ...], int, str, str]] = []
        monkeypatch.setenv("MNEMO_HOME", str(home))
        monkeypatch.setenv("MNEMO_PRINCIPAL", "alice")

    def run(self, *argv: str, stdin: str = "", principal: str = "alice") -> tuple[int, str, str]:
        self.monkeypatch.setenv("MNEMO_PRINCIPAL", principal)
        self.monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(list(argv))
        out, err = self.capsys.readouterr()
        self.outputs.append((argv, code, out, err))
        return code, out, err


def _setup(s: Session) -> tuple[str, str]:
    """Entries in two domains and a room with a second member, and an API key; returns (room, key)."""
    for i in range(4):
        s.run("write", f"deploy note {i}: rotated the credential", "--scope", f"d{i % 2}", "--concept", "ops")
    room = s.run("rooms", "create", "ops")[1].strip()
    code = s.run("rooms", "invite", room, "--max-uses", "3")[1].strip()
    s.run("rooms", "join", code, principal="bob")
    s.run("write", "the credential is in the vault", "--scope", room, principal="bob")
    key = make_key(s.home / "store.db", "carol")  # what `mnemo keys create carol` prints, once
    return room, key


def _exercise(s: Session, room: str, alias: str, value: str) -> None:
    """Store one secret, then run every command that shows data, in every format it has."""
    assert s.run("vault", "add", alias, "--context", f"context of {alias}", stdin=value + "\n")[0] == 0
    assert s.run("--debug", "vault", "add", alias, "--context", "again", stdin=value)[0] == 2  # taken; no value
    s.run("write", f"{alias} was rotated", "--concept", alias)
    for fmt in FORMATS:
        for scope in ((), ("--scope", room)):
            s.run("recent", *scope, "--format", fmt)
            s.run("catchup", *scope, "--consumer", f"c-{fmt}", "--format", fmt)
            s.run("search", alias, *scope, "--format", fmt)
        s.run("recent", "--all", "--include-history", "--format", fmt)
    for fmt in ("table", "json"):
        for argv in (
            ("rooms", "list"),
            ("vault", "list"),
            ("keys", "list"),
            ("watermark", "list"),
            ("watermark", "show", "--consumer", "c-json"),
            ("status",),
        ):
            s.run(*argv, "--format", fmt)
        s.run("vault", "list", "--format", fmt, principal="bob")
        s.run("verify", "--expect", str(s.home / "expect.txt"), "--format", fmt)
    # Searching for the value itself finds nothing: the vault is out of search's reach.
    code, out, _ = s.run("search", "--format", "json", "--", value)
    assert code == 0
    assert all(value not in json.dumps(item, ensure_ascii=False) for item in json.loads(out)["items"])
    s.outputs.pop()  # that output echoes the query the caller typed


COVERED = {
    ("write",), ("recent",), ("catchup",), ("search",), ("rooms", "create"), ("rooms", "invite"),
    ("rooms", "join"), ("rooms", "list"), ("vault", "add"), ("vault", "list"),
    ("keys", "list"), ("watermark", "list"), ("watermark", "show"), ("status",), ("verify",),
}  # fmt: skip


def _exercise_the_rest(s: Session, room: str) -> None:
    """Every other registered command (bare, and its help), and the ones that change state."""
    for fmt in ("table", "json"):
        s.run("check", "--scope", "probe", "--format", fmt)
        s.run("rooms", "create", f"room-{fmt}", "--format", fmt)
        s.run("rooms", "invite", room, "--format", fmt)
    s.run("watermark", "set", "--consumer", "c-json", "1h")
    s.run("watermark", "reset", "--consumer", "c-json")
    s.run("keys", "revoke", "key_nope")
    s.run("demo", "--entries", "5")
    s.run("logout")
    done = COVERED | {("check",), ("watermark", "set"), ("watermark", "reset"), ("keys", "revoke"), ("demo",)}
    for path in _leaf_commands():
        if path in LONG_RUNNING:
            continue
        s.run(*path, "--help")
        if path not in done | {("logout",)}:
            s.run(*path)


def _assert_no_leak(s: Session, value: str, key: str) -> None:
    sealed = base64.b64encode(value.encode()).decode()
    for argv, code, out, err in s.outputs:
        assert "Traceback" not in err or "--debug" in argv, (argv, err)
        for needle, what in ((value, "vault value"), (sealed, "sealed vault value")):
            if needle in out or needle in err:
                raise Leak(f"`mnemo {' '.join(argv)}` (exit {code}) shows the {what}")
        if key in out or key in err:
            raise Leak(f"`mnemo {' '.join(argv)}` shows an API key")


@pytest.fixture
def fresh_home(tmp_path: Path) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir=tmp_path) as home:
        yield Path(home)


@pytest.mark.slow
def test_no_command_in_any_format_ever_shows_a_vault_value_or_a_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fresh_home: Path
) -> None:
    s = Session(capsys, monkeypatch, fresh_home)
    (fresh_home / "expect.txt").write_text("")
    room, key = _setup(s)
    seen: set[str] = set()

    @settings(max_examples=int(os.environ.get("SECRETS_EXAMPLES", "4")))
    @given(value=secret_values, alias=st.from_regex(r"\A[A-Za-z0-9._][A-Za-z0-9._-]{0,19}\Z"))
    def one_secret(value: str, alias: str) -> None:
        if alias in seen:
            return
        seen.add(alias)
        s.outputs.clear()
        _exercise(s, room, alias, value)
        assert len(s.outputs) > 30
        _assert_no_leak(s, value, key)

    one_secret()
    # Then every other command once, against every value stored so far.
    s.outputs.clear()
    value = "the-last-secret-" + os.urandom(8).hex()
    _exercise(s, room, "last-" + os.urandom(4).hex(), value)
    _exercise_the_rest(s, room)
    _assert_no_leak(s, value, key)


def test_the_leak_check_itself_catches_a_leak(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fresh_home: Path
) -> None:
    """The property above would fail if a value reached an output: prove the detector works."""
    s = Session(capsys, monkeypatch, fresh_home)
    value = "hunter2-correct-horse-battery"
    s.run("write", f"oops the password is {value}")
    s.run("recent", "--format", "json")
    with pytest.raises(Leak):
        _assert_no_leak(s, value, "mk_live_" + "0" * 32)


def test_the_installed_cli_keeps_a_piped_value_out_of_every_output(tmp_path: Path) -> None:
    """The same promise through the real console script and real pipes, plus the store's other files."""
    value = "p@ss-" + os.urandom(12).hex()
    env = Target("embedded", tmp_path / "store.db").env(tmp_path / "home")
    runs = [
        run_cli(env, "vault", "add", "db-password", "--context", "prod db", input=value + "\n"),
        run_cli(env, "--debug", "vault", "add", "db-password", "--context", "prod db", input=value),
        run_cli(env, "vault", "list", "--format", "json"),
        run_cli(env, "vault", "list"),
        run_cli(env, "recent", "--all", "--format", "ndjson"),
        run_cli(env, "catchup", "--format", "json"),
    ]
    assert runs[0].returncode == 0 and runs[0].stdout == "db-password\n"
    assert runs[1].returncode == 2
    for proc in runs:
        assert value not in proc.stdout + proc.stderr
    assert "db-password" in runs[2].stdout
    found = run_cli(env, "search", value, "--format", "json")
    assert found.returncode == 0
    assert all(value not in json.dumps(item) for item in json.loads(found.stdout)["items"])
    assert oct((tmp_path / "store.db").stat().st_mode & 0o777) == "0o600"
