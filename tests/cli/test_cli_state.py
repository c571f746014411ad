"""End-to-end tests of `watermark`, `status`, `login`/`logout` (real keyring backends, a real `mnemo serve`) and `demo`."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui import timefmt
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import ROOM_RE
from tests.support.keyrings import subprocess_env
from tests.support.wire import refusing_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A real `mnemo serve` app on a loopback port over a store with one entry; yields (url, key)."""
    from tests.support.wire import served_store

    path = tmp_path / "served.db"
    admin = Store(path)
    _key_id, key = admin.create_key("alice")
    # A minute old: older than a remote catch-up's overlap (2 s), so a pass's boundary is what a test wrote.
    admin.bulk_insert([("alice", WriteRequest("served entry", "general"), timefmt.now_us() - 60_000_000)])
    with served_store(path, workers=2) as server:
        yield server.url, key
    admin.close()


# -- watermark ------------------------------------------------------------------------------


def test_watermark_show_set_list_reset(run_cli, isolated_home: Path) -> None:
    assert run_cli("watermark", "show", "-f", "json").stdout == "null\n"
    table = run_cli("watermark", "show", "--consumer", "bot")
    assert "No watermark for consumer 'bot'" in table.stdout
    r = run_cli("watermark", "set", "2026-11-30T07:00:00Z", "--scope", "ci", "--consumer", "bot", "-f", "json")
    assert r.code == 0
    mark = json.loads(r.stdout)
    assert set(mark) == {"scope", "consumer", "created_at", "boundary_ids", "updated_at"}
    assert mark["scope"] == "ci" and mark["consumer"] == "bot" and mark["boundary_ids"] == []
    assert mark["created_at"] == "2026-11-30T07:00:00.000000Z" and mark["updated_at"].endswith("Z")
    shown = json.loads(run_cli("watermark", "show", "--scope", "ci", "--consumer", "bot", "-f", "json").stdout)
    assert shown == mark
    assert "2026-11-30T07:00:00.000000Z" in run_cli("watermark", "show", "-s", "ci", "-c", "bot").stdout
    run_cli("watermark", "set", "2026-11-29", "--consumer", "other")
    listed = json.loads(run_cli("watermark", "list", "-f", "json").stdout)
    assert [(w["consumer"], w["scope"]) for w in listed] == [("bot", "ci"), ("other", None)]
    assert listed[1]["created_at"] == "2026-11-29T00:00:00.000000Z"
    table = run_cli("watermark", "list").stdout
    assert table.splitlines()[0].split()[:3] == ["CONSUMER", "SCOPE", "WATERMARK"]
    assert "(own store)" in table
    reset = run_cli("watermark", "reset", "--scope", "ci", "--consumer", "bot")
    assert reset.code == 0 and reset.stdout == "" and "removed" in reset.stderr
    assert run_cli("watermark", "show", "-s", "ci", "-c", "bot", "-f", "json").stdout == "null\n"
    assert "nothing changed" in run_cli("watermark", "reset", "-s", "ci", "-c", "bot").stderr


def test_watermark_set_moves_what_catchup_reads(run_cli, isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    store.write("local", WriteRequest("old"))
    store.close()
    run_cli("watermark", "set", "now")
    doc = json.loads(run_cli("catchup", "-f", "json").stdout)
    assert doc["items"] == [] and doc["empty_report"]["kind"] == "nothing_new"
    run_cli("watermark", "reset")
    assert [i["content"] for i in json.loads(run_cli("catchup", "-f", "json").stdout)["items"]] == ["old"]


def test_watermarks_are_per_store(run_cli, tmp_path: Path) -> None:
    for name in ("a.db", "b.db"):
        assert run_cli("--store", str(tmp_path / name), "write", "x").code == 0
    run_cli("--store", str(tmp_path / "a.db"), "watermark", "set", "today")
    assert len(json.loads(run_cli("--store", str(tmp_path / "a.db"), "watermark", "list", "-f", "json").stdout)) == 1
    assert json.loads(run_cli("--store", str(tmp_path / "b.db"), "watermark", "list", "-f", "json").stdout) == []


@pytest.mark.parametrize(
    "args",
    [
        ("watermark", "set", "whenever"),
        ("watermark", "set"),
        ("watermark", "set", "today", "--scope", "xroom:nope"),
        ("watermark", "show", "--format", "ndjson"),
        ("watermark", "show", "--consumer", ""),
        ("watermark", "list", "--format", "xml"),
        ("watermark", "reset", "--scope", ""),
        ("watermark", "frobnicate"),
        ("demo", "--entries", "5"),
        ("demo", "--entries", "lots"),
        ("status", "--format", "ndjson"),
        ("login",),
        ("logout",),
        ("login", "--endpoint", "ftp://example.com"),
        ("--profile", "nope", "status"),
    ],
)
def test_bad_input_on_state_commands_is_exit_2(run_cli, args: tuple[str, ...]) -> None:
    r = run_cli(*args, input="")
    assert r.code == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.strip()


@pytest.mark.parametrize("path", ["/api/v2", "/mnemo", "/api/v1/memory"])
def test_an_endpoint_with_another_path_is_refused_naming_the_accepted_forms(run_cli, path: str) -> None:
    # Never completed to a URL nobody typed (`.../api/v2/api/v1`) and reported unreachable.
    env = {"MNEMO_ENDPOINT": "http://127.0.0.1:9" + path, "MNEMO_API_KEY": "mk_live_" + "1" * 32}
    r = run_cli("recent", env=env)
    assert r.code == 2, r.stderr
    assert f"has the path {path}" in r.stderr and "/api/v1/api/v1" not in r.stderr and path + "/api/v1" not in r.stderr
    assert "the origin (http://127.0.0.1:9) or a base ending in /api/v1" in r.stderr
    for same in (
        "http://127.0.0.1:9",
        "http://127.0.0.1:9/",
        "http://127.0.0.1:9/api/v1/",
        "http://127.0.0.1:9/p/api/v1",
    ):
        doc = json.loads(run_cli("status", "-f", "json", env={**env, "MNEMO_ENDPOINT": same}).stdout)
        assert doc["endpoint"] == same.rstrip("/").removesuffix("/api/v1") + "/api/v1"


@pytest.mark.parametrize(
    "url",
    [
        "http://u:s3cret@127.0.0.1:9/api/v1",
        "http://u:s3cret@127.0.0.1:99999/api/v1",
        "http://u:s3cret@127.0.0.1:9/api/v1?x=1",
        "http://:s3cret@127.0.0.1:9",
    ],
)
def test_an_endpoint_with_a_password_in_it_is_refused_without_showing_it(run_cli, url: str) -> None:
    # The key is a header; a user:password@ in the URL is never sent, and never printed (status, errors, hints).
    for args in (("recent",), ("status",), ("status", "-f", "json")):
        r = run_cli(*args, env={"MNEMO_ENDPOINT": url, "MNEMO_API_KEY": "mk_live_" + "1" * 32})
        assert r.code == 2, (args, r.stdout, r.stderr)
        assert "s3cret" not in r.stdout + r.stderr and r.stderr.strip()
    r = run_cli("--endpoint", url, "recent")
    assert r.code == 2 and "s3cret" not in r.stdout + r.stderr


# -- status ---------------------------------------------------------------------------------


def test_status_of_the_embedded_default(run_cli, isolated_home: Path) -> None:
    doc = json.loads(run_cli("status", "--format", "json").stdout)
    assert doc == {
        "backend": "embedded",
        "store": str(isolated_home / "store.db"),
        "principal": "local",
        "consumer": "default",
        "key_source": "none",
        "state": str(isolated_home / "state.db"),
        "stats": {
            "total_atoms": 0,
            "domains": [],
            "concept_edges": 0,
            "avg_valence": 0.0,
            "feedback_atoms": 0,
            "episodic_fingerprints": 0,
        },
    }
    run_cli("write", "one", "--scope", "notes", env={"MNEMO_PRINCIPAL": "alice"})
    doc = json.loads(run_cli("status", "--format", "json", env={"MNEMO_PRINCIPAL": "alice"}).stdout)
    assert doc["stats"]["total_atoms"] == 1 and doc["stats"]["domains"] == ["notes"]
    table = run_cli("status", env={"MNEMO_PRINCIPAL": "alice", "MNEMO_CONSUMER": "bot"}).stdout
    assert "1 in 1 domain(s)" in table
    assert "backend" in table and "embedded" in table and "alice" in table and "bot" in table


def test_status_of_a_store_it_cannot_read_says_why(run_cli, tmp_path: Path) -> None:
    # status is run when something is wrong: a folder or another file named as the store is said, exit 0.
    folder, other = tmp_path / "a folder", tmp_path / "notes.txt"
    folder.mkdir()
    other.write_text("not a store\n" * 500)
    for path, why in ((folder, "is a folder"), (other, "not a mnemo store")):
        r = run_cli("--store", str(path), "status")
        assert r.code == 0, r.stderr
        [entries] = [line for line in r.stdout.splitlines() if line.startswith("entries")]
        assert "unknown" in entries and why in entries, r.stdout
        assert json.loads(run_cli("--store", str(path), "status", "-f", "json").stdout)["stats"] is None


def test_status_of_an_endpoint_names_the_key_source_never_the_key(cli, tmp_path: Path) -> None:
    key = "mk_live_" + "ab" * 16
    env = {"MNEMO_ENDPOINT": "http://127.0.0.1:9/api/v1", "MNEMO_API_KEY": key, "MNEMO_STATE": str(tmp_path / "s.db")}
    r = cli("status", "-f", "json", env=env)
    doc = json.loads(r.stdout)
    assert set(doc) == {"backend", "endpoint", "principal", "consumer", "key_source", "state", "stats"}
    assert doc["stats"] is None  # nothing listens on port 9
    assert doc["backend"] == "remote" and doc["endpoint"] == "http://127.0.0.1:9/api/v1"
    assert doc["key_source"] == "env" and doc["state"] == str(tmp_path / "s.db")
    table = cli("status", env=env)
    for out in (r.stdout, r.stderr, table.stdout, table.stderr):
        assert key not in out
    none = cli("status", "-f", "json", env={**subprocess_env(None), "MNEMO_ENDPOINT": "http://127.0.0.1:9/api/v1"})
    assert json.loads(none.stdout)["key_source"] == "none" and json.loads(none.stdout)["principal"] is None


# -- login and logout -----------------------------------------------------------------------


def test_login_keeps_the_key_in_the_keyring_and_records_the_endpoint(
    cli, isolated_home: Path, tmp_path: Path, served: tuple[str, str]
) -> None:
    url, key = served
    env = subprocess_env(tmp_path / "keyring.json")
    r = cli("login", "--endpoint", url, input=key + "\n", env=env)
    assert r.code == 0, r.stderr
    assert r.stdout == "" and key not in r.stderr and "OS keyring" in r.stderr
    assert json.loads((tmp_path / "keyring.json").read_text()) == {f"mnemo\x1f{url}": key}
    config = tomllib.loads((isolated_home / "config.toml").read_text())
    assert config == {"default_profile": "default", "profiles": {"default": {"endpoint": url}}}
    # The profile now selects the endpoint and the keyring supplies the key.
    status = json.loads(cli("status", "-f", "json", env=env).stdout)
    assert status["backend"] == "remote" and status["endpoint"] == url and status["key_source"] == "keyring"
    assert status["principal"] == "alice"  # the server names the key's principal (GET /mnemo/whoami)
    recent = cli("recent", "-f", "ndjson", env=env)
    assert recent.code == 0 and json.loads(recent.stdout)["content"] == "served entry"
    # A local store is still one flag away.
    assert json.loads(cli("--store", str(tmp_path / "l.db"), "status", "-f", "json", env=env).stdout)["backend"] == (
        "embedded"
    )
    out = cli("logout", env=env)
    assert out.code == 0 and "removed" in out.stderr
    assert json.loads((tmp_path / "keyring.json").read_text()) == {}
    # logout undid what login recorded: the profile holding only the endpoint went, with default_profile.
    assert tomllib.loads((isolated_home / "config.toml").read_text()) == {}
    assert "Profile 'default' (only this endpoint) removed" in out.stderr
    status = json.loads(cli("status", "-f", "json", env=env).stdout)
    assert status["backend"] == "embedded"
    back = cli("recent", env=env)
    assert back.code == 0 and "Traceback" not in back.stderr


def test_logout_keeps_a_profile_with_more_in_it_and_profile_use_switches(
    cli, isolated_home: Path, tmp_path: Path, served: tuple[str, str]
) -> None:
    url, key = served
    env = subprocess_env(tmp_path / "keyring.json")
    (isolated_home / "config.toml").write_text(
        f'default_profile = "work"\n\n[profiles.work]\nendpoint = "{url}"\nconsumer = "me"\n\n'
        '[profiles.home]\nstore = "home.db"\n'
    )
    assert cli("login", input=key + "\n", env=env).code == 0
    out = cli("logout", env=env)
    assert out.code == 0 and "Profile 'work'" in out.stderr and "mnemo profile use NAME" in out.stderr
    refused = cli("recent", env=env)
    assert refused.code == 3 and "mnemo login" in refused.stderr
    listed = json.loads(cli("profile", "list", "-f", "json", env=env).stdout)
    assert [(p["name"], p["in_use"]) for p in listed] == [("work", True), ("home", False)]
    table = cli("profile", "list", env=env).stdout.splitlines()
    assert table[1].split()[:2] == ["*", "work"]
    bad = cli("profile", "use", "hom", env=env)
    assert bad.code == 2 and "did you mean 'home'?" in bad.stderr
    assert cli("profile", "use", "home", env=env).code == 0
    assert cli("write", "at home", env=env).code == 0
    assert (isolated_home / "home.db").exists()
    assert json.loads(cli("status", "-f", "json", env=env).stdout)["backend"] == "embedded"
    assert cli("profile", "use", "--none", env=env).code == 0
    assert "default_profile" not in tomllib.loads((isolated_home / "config.toml").read_text())


def test_login_with_a_refused_key_stores_nothing(cli, tmp_path: Path, served: tuple[str, str]) -> None:
    url, _key = served
    env = subprocess_env(tmp_path / "keyring.json")
    r = cli("login", "--endpoint", url, input="mk_live_" + "0" * 32 + "\n", env=env)
    assert r.code == 3 and "Traceback" not in r.stderr and "mk_live_000" not in r.stderr
    # What the server said, and advice for the one running login (not "run `mnemo login`" again).
    assert "refused the key (unknown API key)" in r.stderr and "check the key you gave" in r.stderr
    assert "mnemo login" not in r.stderr
    assert not (tmp_path / "keyring.json").exists()


def test_login_with_an_empty_key_is_exit_3(cli, tmp_path: Path) -> None:
    env = subprocess_env(tmp_path / "keyring.json")
    r = cli("login", "--endpoint", "http://127.0.0.1:9/api/v1", input="\n", env=env)
    assert r.code == 3 and "no key" in r.stderr


def test_login_to_an_unreachable_endpoint_is_exit_5(cli, tmp_path: Path) -> None:
    env = subprocess_env(tmp_path / "keyring.json")
    with refusing_port() as sock:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1"
        r = cli("login", "--endpoint", url, input="mk_live_" + "1" * 32 + "\n", env=env)
    assert r.code == 5 and "Traceback" not in r.stderr
    assert not (tmp_path / "keyring.json").exists()


def test_login_without_a_keyring_names_both_ways_out(cli, isolated_home: Path, served: tuple[str, str]) -> None:
    url, key = served
    r = cli("login", "--endpoint", url, input=key + "\n", env=subprocess_env(None))
    assert r.code == 3
    assert "MNEMO_API_KEY" in r.stderr and "--insecure-storage" in r.stderr and "Traceback" not in r.stderr
    assert key not in r.stderr + r.stdout
    assert not (isolated_home / "credentials.json").exists() and not (isolated_home / "config.toml").exists()


def test_insecure_storage_writes_an_announced_0600_file(cli, isolated_home: Path, served: tuple[str, str]) -> None:
    url, key = served
    env = subprocess_env(None)
    r = cli("login", "--endpoint", url, "--insecure-storage", input=key + "\n", env=env)
    assert r.code == 0, r.stderr
    path = isolated_home / "credentials.json"
    assert str(path) in r.stderr and "0600" in r.stderr and key not in r.stderr
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(cli("status", "-f", "json", env=env).stdout)["key_source"] == "file"
    assert cli("recent", "-f", "ndjson", env=env).code == 0
    assert cli("logout", env=env).code == 0 and not path.exists()


def test_mnemo_api_key_wins_and_needs_no_login(cli, served: tuple[str, str]) -> None:
    url, key = served
    env = {**subprocess_env(None), "MNEMO_ENDPOINT": url, "MNEMO_API_KEY": key}
    status = json.loads(cli("status", "-f", "json", env=env).stdout)
    assert status["key_source"] == "env"
    assert status["stats"]["total_atoms"] == 1  # the one thing status asks the endpoint (docs/cli.md)
    assert json.loads(cli("recent", "-f", "json", env=env).stdout)["items"][0]["content"] == "served entry"


def test_commands_against_an_endpoint(run_cli, tmp_path: Path, served: tuple[str, str]) -> None:
    url, key = served
    env = {"MNEMO_ENDPOINT": url, "MNEMO_API_KEY": key, "MNEMO_STATE": str(tmp_path / "state.db")}
    atom = run_cli("write", "from the run_cli", "--scope", "notes", env=env)
    assert atom.code == 0, atom.stderr
    doc = json.loads(run_cli("catchup", "-f", "json", env=env).stdout)
    assert [i["content"] for i in doc["items"]] == ["from the run_cli", "served entry"]
    assert doc["watermark"]["after"]["boundary_ids"][0] == atom.stdout.strip()
    assert json.loads(run_cli("catchup", "-f", "json", env=env).stdout)["items"] == []
    marks = json.loads(run_cli("watermark", "list", "-f", "json", env=env).stdout)
    assert len(marks) == 1 and marks[0]["consumer"] == "default"
    assert run_cli("search", "cli", "-f", "ndjson", env=env).stdout.count("\n") == 1
    address = run_cli("rooms", "create", "team", env=env).stdout.strip()
    assert address.startswith("xroom:room_")
    assert json.loads(run_cli("rooms", "list", "-f", "json", env=env).stdout)[0]["address"] == address
    refused = run_cli("demo", env=env)
    assert refused.code == 2 and "embedded store only" in refused.stderr


# -- demo -----------------------------------------------------------------------------------


def test_demo_fills_every_screen(run_cli, isolated_home: Path) -> None:
    r = run_cli("demo", "--entries", "300", "--seed", "7")
    assert r.code == 0, r.stderr
    assert "Wrote 300 demo entries" in r.stdout and "xroom:room_" in r.stdout and "staging-deploy-token" in r.stdout
    own = [json.loads(x) for x in run_cli("recent", "--all", "-f", "ndjson").stdout.splitlines()]
    assert len(own) == 240  # 80% in the own store, the superseded three replaced by their revisions
    assert len({i["domain"] for i in own}) >= 5
    assert len({i["provenance"]["agent"] for i in own}) >= 4
    history = run_cli("recent", "--all", "-f", "ndjson", "--include-history").stdout.splitlines()
    assert len(history) == 243
    room_list = json.loads(run_cli("rooms", "list", "-f", "json").stdout)
    assert [(r["name"], r["role"]) for r in room_list] == [("build-fleet", "owner"), ("design-review", "owner")]
    for room in room_list:
        items = [
            json.loads(x)
            for x in run_cli("recent", "--all", "-f", "ndjson", "-s", room["address"]).stdout.split("\n")[:-1]
        ]
        assert len(items) == 30
        assert len({i["provenance"]["principal"] for i in items}) >= 2
    vault = json.loads(run_cli("vault", "list", "-f", "json").stdout)
    assert [s["alias"] for s in vault["secrets"]] == ["staging-deploy-token"]
    sealed = Store(isolated_home / "store.db").db.execute("SELECT sealed FROM vault").fetchone()[0]
    everything = run_cli("recent", "--all", "-f", "json", "--include-history").stdout + run_cli("search", "demo").stdout
    assert sealed not in everything and "staging-deploy-token" not in everything
    assert len(json.loads(run_cli("search", "flaky", "-f", "json").stdout)["items"]) > 0


def test_demo_twice_refuses_then_adds_to_the_same_rooms_after_the_newest_with_force(run_cli) -> None:
    assert run_cli("demo", "--entries", "20").code == 0
    before = json.loads(run_cli("recent", "--all", "-f", "json").stdout)["items"]
    refused = run_cli("demo", "--entries", "20")
    assert refused.code == 2 and "already holds entries" in refused.stderr and "--force" in refused.stderr
    assert json.loads(run_cli("recent", "--all", "-f", "json").stdout)["items"] == before  # nothing was added
    again = run_cli("demo", "--entries", "20", "--force")
    assert again.code == 0 and "vault: unchanged" in again.stdout
    assert len(json.loads(run_cli("rooms", "list", "-f", "json").stdout)) == 2
    items = json.loads(run_cli("recent", "--all", "-f", "json").stdout)["items"]
    added = [i for i in items if i["atom_id"] not in {b["atom_id"] for b in before}]
    stamps = sorted(timefmt.parse_iso(i["created_at"]) for i in added)
    newest_before = max(timefmt.parse_iso(i["created_at"]) for i in before)
    assert len(added) >= 16 and stamps[0] > newest_before  # after what was there, never among it
    assert stamps[-1] - stamps[0] > 2_000  # spread over time, not stamped within 2 ms


def test_listings_answer_the_same_through_an_endpoint_as_on_the_embedded_store(run_cli, tmp_path: Path) -> None:
    from tests.support.wire import served_store

    path = tmp_path / "shared.db"
    assert run_cli("--store", str(path), "demo", "--entries", "60", "--seed", "3").code == 0
    admin = Store(path)
    _key_id, key = admin.create_key("local")
    admin.close()
    local = {"MNEMO_STORE": str(path), "MNEMO_STATE": str(tmp_path / "local-state.db")}
    with served_store(path, workers=2) as server:
        remote = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key, "MNEMO_STATE": str(tmp_path / "r-state.db")}
        room = json.loads(run_cli("rooms", "list", "-f", "json", env=local).stdout)[0]["address"]
        for args in (
            ("recent", "--all", "-f", "ndjson"),
            ("recent", "--all", "-f", "ndjson", "--include-history", "--scope", "planning"),
            ("recent", "-n", "5", "-f", "ndjson", "--scope", room, "--exclude-author", "local"),
            ("search", "flaky build", "-f", "ndjson", "--order-by", "recency"),
            ("rooms", "list", "-f", "json"),
            ("vault", "list", "-f", "json"),
        ):
            a, b = run_cli(*args, env=local), run_cli(*args, env=remote)
            assert a.code == b.code == 0, (args, a.stderr, b.stderr)
            assert a.stdout == b.stdout, args
            assert a.stdout.strip()
        a = json.loads(run_cli("catchup", "-f", "json", "--scope", room, env=local).stdout)
        b = json.loads(run_cli("catchup", "-f", "json", "--scope", room, env=remote).stdout)
        assert a["items"] == b["items"] and len(a["items"]) == 6
        assert a["watermark"]["after"]["created_at"] == b["watermark"]["after"]["created_at"]


def test_login_records_the_endpoint_in_the_named_profile_keeping_comments(
    cli, isolated_home: Path, tmp_path: Path, served: tuple[str, str]
) -> None:
    url, key = served
    (isolated_home / "config.toml").write_text('# mine\nconsumer = "me"\n\n[profiles.work]\n# team server\n')
    env = subprocess_env(tmp_path / "keyring.json")
    r = cli("--profile", "work", "login", "--endpoint", url, input=key + "\n", env=env)
    assert r.code == 0, r.stderr
    text = (isolated_home / "config.toml").read_text()
    assert "# mine" in text and "# team server" in text
    assert tomllib.loads(text) == {"consumer": "me", "profiles": {"work": {"endpoint": url}}}
    status = json.loads(cli("--profile", "work", "status", "-f", "json", env=env).stdout)
    assert status["endpoint"] == url and status["key_source"] == "keyring" and status["consumer"] == "me"
    assert json.loads(cli("status", "-f", "json", env=env).stdout)["backend"] == "embedded"


def test_watermark_messages_say_your_own_store(run_cli: Any) -> None:
    r = run_cli("watermark", "show")
    assert r.code == 0 and "on your own store:" in r.stdout and "(own store)" not in r.stdout
    r = run_cli("watermark", "reset")
    assert r.code == 0 and r.stdout == "" and "on your own store;" in r.stderr


def test_watermark_set_in_the_future_warns_on_stderr(run_cli: Any) -> None:
    r = run_cli("watermark", "set", "2999-01-01", "--format", "json")
    assert r.code == 0 and json.loads(r.stdout)["created_at"] == "2999-01-01T00:00:00.000000Z"
    assert "is in the future" in r.stderr and "mnemo watermark reset" in r.stderr
    r = run_cli("watermark", "set", "2h")
    assert r.code == 0 and r.stderr == ""


def test_the_origin_and_the_api_base_are_one_endpoint_and_one_watermark(run_cli: Any, isolated_home: Path) -> None:
    from tests.support.wire import served_store

    key = run_cli("keys", "create", "local").stdout.strip()
    run_cli("write", "before the first pass")
    with served_store(isolated_home / "store.db") as server:
        # A catch-up through the /api/v1 base (how watermarks were kept), then one through the origin:
        # the same endpoint, so the second pass starts at the first one's watermark.
        first = run_cli("catchup", "--format", "json", env={"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key})
        assert first.code == 0 and "before the first pass" in first.stdout
        second = run_cli("catchup", "--format", "json", env={"MNEMO_ENDPOINT": server.base, "MNEMO_API_KEY": key})
        assert second.code == 0 and "before the first pass" not in second.stdout
        # A 404 that is an answer stays one: an unknown invite code.
        r = run_cli("rooms", "join", "mnvr_nope", env={"MNEMO_ENDPOINT": server.base, "MNEMO_API_KEY": key})
        assert r.code == 2 and r.stderr.strip() == "mnemo: unknown invite code"


def test_demo_summary_counts_what_it_wrote(run_cli: Any) -> None:
    r = run_cli("demo", "--entries", "10", "--seed", "1")
    assert r.code == 0
    assert "Wrote 10 demo entries and 1 revision" in r.stdout or "Wrote 10 demo entries and 3 revisions" in r.stdout
    # Each room line counts the principals that really wrote there: never more than its entries.
    import re

    rooms = re.findall(r"room '[^']+' " + ROOM_RE + r": (\d+) entr(?:y|ies) by (\d+) authors?", r.stdout)
    assert len(rooms) == 2
    for entries, authors in rooms:
        assert 1 <= int(authors) <= int(entries)
