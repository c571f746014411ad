"""No output of any command, in any format, ever shows a vault value or an API key."""

from __future__ import annotations

import base64
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_tui.cli import main
from mnemo_tui.engine.sqlite.store import Store
from tests.support.keyrings import MemoryKeyring, subprocess_env
from tests.support.reliability import Target, make_key, run_cli

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
    from typer import Context

    from mnemo_tui.cli.app import app

    root = typer.main.get_command(app)
    found: list[tuple[str, ...]] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        if hasattr(cmd, "list_commands"):  # a group: the root's commands are loaded by name, when asked for
            context = Context(cmd)
            for name in cmd.list_commands(context):
                walk(cmd.get_command(context, name), (*path, name))
        elif path:
            found.append(path)

    walk(root, ())
    return found


class Leak(AssertionError):
    pass


class Session:
    """A fresh MNEMO_HOME with entries, a room with a second member, a key and one secret; runs `mnemo` in-process."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
        import keyring

        self.capsys = capsys
        self.monkeypatch = monkeypatch
        self.home = home
        self.outputs: list[tuple[tuple[str, ...], int, str, str]] = []
        self.keyring = MemoryKeyring()  # a real keyring backend of the test's own: the vault's pairs go there
        monkeypatch.setattr(keyring.core, "_keyring_backend", self.keyring)
        monkeypatch.setenv("MNEMO_HOME", str(home))
        monkeypatch.setenv("MNEMO_PRINCIPAL", "alice")

    def run(self, *argv: str, stdin: str = "", principal: str = "alice", tty: bool = False) -> tuple[int, str, str]:
        self.monkeypatch.setenv("MNEMO_PRINCIPAL", principal)
        self.monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        self.monkeypatch.setattr("mnemo_tui.cli.terminal.is_tty", lambda stream: tty)
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
    # `get` on a terminal without --reveal unseals but prints nothing, and says how.
    code, out, err = s.run("vault", "get", alias, tty=True)
    assert code == 0 and out == "" and "--reveal" in err
    assert s.run("--debug", "vault", "get", alias, "--insecure-storage")[0] == 3  # no pair in the file
    assert s.run("--debug", "vault", "get", alias, principal="bob")[0] == 2  # not bob's secret
    assert s.run("--debug", "vault", "get", "no-such-" + alias)[0] == 2
    assert s.run("--debug", "vault", "keygen")[0] == 2  # the pair exists: refused, nothing printed but a line
    s.run("vault", "export-public")
    # Piped (or --reveal), `get` prints the value: the one output that must, checked and set aside.
    assert s.run("vault", "get", alias)[1:] == (value + "\n", "")
    assert s.run("vault", "get", alias, "--reveal", tty=True)[1] == value + "\n"
    del s.outputs[-2:]
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
    ("rooms", "join"), ("rooms", "list"), ("vault", "add"), ("vault", "list"), ("vault", "get"),
    ("vault", "keygen"), ("vault", "export-public"),
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


def _private_keys(s: Session) -> list[str]:
    """The private key texts of every vault pair the session's keyring holds (as kept: `mnemo-key-v1:...`)."""
    return [text for (_service, user), text in s.keyring.secrets.items() if user.startswith("vault-key:")]


def _assert_no_leak(s: Session, value: str, key: str, alias: str | None = None) -> None:
    in_files = [(value, "vault value"), (base64.b64encode(value.encode()).decode(), "value in base64")]
    in_files += [(private.split(":", 1)[1], "vault private key") for private in _private_keys(s)]
    needles = list(in_files)
    if alias is not None:  # the sealed value is in the store file, by design, and in no output
        store = Store(s.home / "store.db")
        try:
            needles.append((store.vault_sealed("alice", alias), "sealed vault value"))
        finally:
            store.close()
    for argv, code, out, err in s.outputs:
        assert "Traceback" not in err or "--debug" in argv, (argv, err)
        for needle, what in needles:
            if needle in out or needle in err:
                raise Leak(f"`mnemo {' '.join(argv)}` (exit {code}) shows the {what}")
        if key in out or key in err:
            raise Leak(f"`mnemo {' '.join(argv)}` shows an API key")
    # Nor does any file mnemo keeps (the store and its journal, the state database, config) hold one.
    for path in sorted(p for p in s.home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for needle, what in in_files:
            if needle.encode() in data:
                raise Leak(f"{path.name} holds the {what}")


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
        _assert_no_leak(s, value, key, alias)

    one_secret()
    # Then every other command once, against every value stored so far.
    s.outputs.clear()
    value = "the-last-secret-" + os.urandom(8).hex()
    alias = "last-" + os.urandom(4).hex()
    _exercise(s, room, alias, value)
    _exercise_the_rest(s, room)
    _assert_no_leak(s, value, key, alias)


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
    keyring_file = tmp_path / "keyring.json"
    env = Target("embedded", tmp_path / "store.db").env(tmp_path / "home", **subprocess_env(keyring_file))
    runs = [
        run_cli(env, "vault", "add", "db-password", "--context", "prod db", input=value + "\n"),
        run_cli(env, "--debug", "vault", "add", "db-password", "--context", "prod db", input=value),
        run_cli(env, "--debug", "vault", "get", "nope"),
        run_cli(env, "--debug", "vault", "get", "db-password", "--insecure-storage"),
        run_cli({**env, **subprocess_env(None)}, "--debug", "vault", "get", "db-password"),
        run_cli(env, "vault", "list", "--format", "json"),
        run_cli(env, "vault", "list"),
        run_cli(env, "recent", "--all", "--format", "ndjson"),
        run_cli(env, "catchup", "--format", "json"),
    ]
    assert runs[0].returncode == 0 and runs[0].stdout == "db-password\n"
    assert [p.returncode for p in runs[1:5]] == [2, 2, 3, 3]
    private = json.loads(keyring_file.read_text())
    for proc in runs:
        assert value not in proc.stdout + proc.stderr
        assert not any(text.split(":", 1)[1] in proc.stdout + proc.stderr for text in private.values())
    got = run_cli(env, "vault", "get", "db-password")
    assert got.returncode == 0 and got.stdout == value + "\n"
    for path in tmp_path.glob("store.db*"):
        assert value.encode() not in path.read_bytes()
    assert "db-password" in runs[5].stdout
    found = run_cli(env, "search", value, "--format", "json")
    assert found.returncode == 0
    assert all(value not in json.dumps(item) for item in json.loads(found.stdout)["items"])
    assert oct((tmp_path / "store.db").stat().st_mode & 0o777) == "0o600"
