"""The sealed vault end to end: round trips on the embedded store and over `mnemo serve`, every refusal with its exit
code, and after each test the store files and the server's log scanned for every plaintext and private key."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state import sealing
from tests.conftest import CliResult
from tests.support.keyrings import subprocess_env
from tests.support.reliability import Server, start_server

Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("vault-server")
    (root / "home").mkdir()
    running = start_server(root / "served.db", root / "home", ("alice", "bob"))
    yield running
    running.stop()


class Plain:
    """The plaintexts a test used; after it, no store file, log or state file may hold one, nor a private key."""

    def __init__(self) -> None:
        self.values: list[str] = []

    def new(self, label: str = "value") -> str:
        value = f"{label}-{secrets.token_hex(10)}"
        self.values.append(value)
        return value


@pytest.fixture
def plain(isolated_home: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Plain]:
    found = Plain()
    yield found
    server: Server | None = request.getfixturevalue("server") if "server" in request.fixturenames else None
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    private = [
        text.split(":", 1)[1]
        for p in files
        if p.name.endswith("keyring.json") or p.name == "vault-keys.json"
        for text in json.loads(p.read_text()).values()
        if text.startswith(sealing.PRIVATE_PREFIX)
    ]
    keepers = ("keyring.json", "vault-keys.json", ".key")  # where a private key is meant to be
    stores = [p for p in files if not p.name.endswith(keepers)]
    logs: list[tuple[str, bytes]] = [(str(p), p.read_bytes()) for p in stores]
    if server is not None:
        logs.append(("server log", server.log_text().encode()))
        logs += [(str(p), p.read_bytes()) for p in server.store.parent.glob(server.store.name + "*")]
    for where, data in logs:
        for value in found.values:
            assert value.encode() not in data, f"{where} holds a plaintext"
            assert base64.b64encode(value.encode()) not in data, f"{where} holds a plaintext in base64"
        for key in private:
            assert key.encode() not in data, f"{where} holds a private key"


def no_keyring() -> dict[str, str]:
    return subprocess_env(None)


def test_round_trip_on_the_embedded_store(cli: Cli, plain: Plain, isolated_home: Path) -> None:
    value = plain.new()
    added = cli("vault", "add", "db", "--context", "prod db", input=value + "\n")
    assert added.code == 0 and added.stdout == "db\n", added.stderr
    assert "Created vault key pair" in added.stderr and "OS keyring" in added.stderr
    got = cli("vault", "get", "db")  # a pipe: the value and a newline, nothing on stderr
    assert (got.code, got.stdout, got.stderr) == (0, value + "\n", "")
    kept = json.loads((isolated_home / "test-keyring.json").read_text())
    assert list(kept) == [f"mnemo\x1fvault-key:{(isolated_home / 'store.db').resolve()}"]
    store = Store(isolated_home / "store.db")
    sealed = store.vault_sealed("local", "db")
    store.close()
    assert base64.b64decode(sealed).startswith(sealing.MAGIC)
    # A second secret goes to the same pair; the public key is what export-public prints.
    assert cli("vault", "add", "db2", "--context", "x", input=plain.new() + "\n").stderr == ""
    public = cli("vault", "export-public")
    assert public.code == 0 and public.stdout.startswith(sealing.PUBLIC_PREFIX)
    assert sealing.sealed_key_id("db", sealed) in public.stderr


def test_round_trip_over_mnemo_serve(cli: Cli, plain: Plain, server: Server) -> None:
    value = plain.new("served")
    env = {"MNEMO_ENDPOINT": server.base, "MNEMO_API_KEY": server.keys["alice"]}
    assert cli("vault", "add", "api", "--context", "served", input=value, env=env).code == 0
    got = cli("vault", "get", "api", env=env)
    assert got.code == 0 and got.stdout == value + "\n", got.stderr
    bob = cli("vault", "get", "api", env={**env, "MNEMO_API_KEY": server.keys["bob"]})
    assert bob.code == 2 and "no secret named 'api'" in bob.stderr  # bob's vault is bob's
    debug = cli("--debug", "vault", "get", "api", "--insecure-storage", env=env)
    assert debug.code == 3 and value not in debug.stdout + debug.stderr


def test_a_terminal_gets_the_value_only_with_reveal(cli: Cli, plain: Plain, isolated_home: Path) -> None:
    value = plain.new()
    assert cli("vault", "add", "tty", "--context", "x", input=value).code == 0
    hidden = cli("vault", "get", "tty", columns=100)  # stdout on a terminal
    assert hidden.code == 0 and hidden.stdout == "" and "--reveal" in hidden.stderr and value not in hidden.stderr
    shown = cli("vault", "get", "tty", "--reveal", columns=100)
    assert shown.code == 0 and value in shown.stdout
    plain.values.remove(value)  # what a terminal shows is not kept anywhere; only files are scanned


def test_without_a_keyring_add_and_get_exit_3_naming_the_fallback(cli: Cli, plain: Plain, isolated_home: Path) -> None:
    value = plain.new()
    for argv in (("vault", "add", "k", "--context", "c"), ("vault", "get", "k"), ("vault", "keygen")):
        r = cli(*argv, input=value, env=no_keyring())
        assert r.code == 3 and "--insecure-storage" in r.stderr and "Traceback" not in r.stderr, argv
    stored = cli("vault", "add", "k", "--context", "c", "--insecure-storage", input=value, env=no_keyring())
    path = isolated_home / "vault-keys.json"
    assert stored.code == 0 and str(path) in stored.stderr and "NOT encrypted" in stored.stderr
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    got = cli("vault", "get", "k", "--insecure-storage", env=no_keyring())
    assert got.code == 0 and got.stdout == value + "\n"
    # Once announced, the file is used without the flag (as gh reads its file), with or without a keyring.
    again = cli("vault", "get", "k", env=no_keyring())
    assert again.code == 0 and again.stdout == value + "\n", again.stderr
    assert cli("vault", "get", "k").stdout == value + "\n"  # the test's keyring holds no pair for it
    assert cli("vault", "keygen", env=no_keyring()).code == 2  # the pair in the file is this backend's
    path.chmod(0o644)
    loose = cli("vault", "get", "k", "--insecure-storage", env=no_keyring())
    assert loose.code == 6 and "chmod 600" in loose.stderr


def test_a_value_sealed_to_another_pair_is_exit_3(cli: Cli, plain: Plain) -> None:
    assert cli("vault", "add", "k", "--context", "c", input=plain.new()).code == 0
    assert cli("vault", "keygen").code == 2  # a pair exists: replacing it needs --force
    replaced = cli("vault", "keygen", "--force")
    assert replaced.code == 0 and replaced.stdout.startswith(sealing.PUBLIC_PREFIX)
    r = cli("vault", "get", "k")
    assert r.code == 3 and "sealed to another key pair" in r.stderr and r.stdout == ""


def test_a_value_stored_by_0_1_is_exit_2(cli: Cli, isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    store.vault_add("local", "old", "from 0.1", base64.b64encode(b"legacy-plain").decode())
    store.close()
    assert cli("vault", "keygen").code == 0
    for env in ({}, no_keyring()):
        r = cli("vault", "get", "old", "--insecure-storage", env=env) if env else cli("vault", "get", "old")
        assert r.code == 2 and "sealed without a key; add it again" in r.stderr and "legacy-plain" not in r.stdout


def test_an_altered_value_unknown_and_bad_aliases(cli: Cli, plain: Plain, isolated_home: Path) -> None:
    assert cli("vault", "add", "k", "--context", "c", input=plain.new()).code == 0
    assert cli("vault", "get", "nope").code == 2
    assert cli("vault", "get", "bad alias!").code == 2
    store = Store(isolated_home / "store.db")
    raw = bytearray(base64.b64decode(store.vault_sealed("local", "k")))
    raw[-1] ^= 1
    store.db.execute("UPDATE vault SET sealed = ? WHERE alias = 'k'", (base64.b64encode(bytes(raw)).decode(),))
    store.close()
    r = cli("vault", "get", "k")
    assert r.code == 3 and "does not open" in r.stderr


def test_a_team_shares_one_pair_and_a_contributor_seals_to_its_public_key(
    cli: Cli, plain: Plain, tmp_path: Path, isolated_home: Path
) -> None:
    store = {"MNEMO_STORE": str(isolated_home / "store.db")}
    value = plain.new("team")
    assert cli("vault", "add", "shared", "--context", "team", input=value, env=store).code == 0
    exported = cli("vault", "export-key", str(tmp_path / "team.key"), env=store)
    assert (
        exported.code == 0 and exported.stdout == "" and oct((tmp_path / "team.key").stat().st_mode & 0o777) == "0o600"
    )
    assert cli("vault", "export-key", str(tmp_path / "team.key"), env=store).code == 2  # never overwrites
    # A teammate: another home, another keyring, the same store.
    mate_home = tmp_path / "mate"
    mate_home.mkdir()
    mate = {**store, "MNEMO_HOME": str(mate_home), "TEST_KEYRING_FILE": str(tmp_path / "mate-keyring.json")}
    assert cli("vault", "get", "shared", env=mate).code == 3  # no pair yet
    assert cli("vault", "import-key", "garbage", env=mate).code == 2
    imported = cli("vault", "import-key", str(tmp_path / "team.key"), env=mate)
    assert imported.code == 0, imported.stderr
    assert cli("vault", "get", "shared", env=mate).stdout == value + "\n"
    # A contributor with only the public key, and no keyring at all, seals to it; the team reads it.
    public = cli("vault", "export-public", env=store).stdout.strip()
    bot_value = plain.new("bot")
    bot = {**no_keyring(), **store, "MNEMO_HOME": str(tmp_path)}
    assert cli("vault", "add", "ci", "--context", "bot", "--to", public, input=bot_value, env=bot).code == 0
    assert cli("vault", "get", "ci", env=bot).code == 3  # it cannot read what it sealed
    assert cli("vault", "get", "ci", env=mate).stdout == bot_value + "\n"
    assert cli("vault", "add", "x", "--context", "c", "--to", "mnemo-pub-v1:short", input="v", env=bot).code == 2


def test_demo_seals_its_secret_to_the_users_own_pair(cli: Cli, isolated_home: Path) -> None:
    made = cli("demo", "--entries", "10")
    assert made.code == 0 and "Created vault key pair" in made.stderr  # the first pair, announced as vault add does
    assert "sealed to your key pair: mnemo vault get staging-deploy-token" in made.stdout
    r = cli("vault", "get", "staging-deploy-token")
    assert r.code == 0 and r.stdout.startswith("demo-"), r.stderr
    public = cli("vault", "export-public").stdout
    again = cli("--store", str(isolated_home / "store.db"), "demo", "--entries", "10", "--force")
    assert again.code == 0 and "Created" not in again.stderr  # the pair that exists is used
    assert cli("vault", "export-public").stdout == public


def test_demo_without_a_keyring_seals_to_a_pair_in_the_key_file(cli: Cli, isolated_home: Path) -> None:
    env = no_keyring()  # the demo's own pair, kept in the file: tests/cli/test_demo_secret.py
    other = isolated_home / "other.db"
    assert cli("--store", str(other), "vault", "keygen", "--insecure-storage", env=env).code == 0
    kept = cli("--store", str(other), "demo", "--entries", "10", env=env)
    assert kept.code == 0 and "sealed to your key pair" in kept.stdout, kept.stderr
    got = cli("--store", str(other), "vault", "get", "staging-deploy-token", env=env)
    assert got.code == 0 and got.stdout.startswith("demo-")
