"""End-to-end tests of exit codes: rooms and vault input, unreadable config and state (6), Ctrl-C (130), --debug."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO

pytestmark = pytest.mark.timeout(120)

# The server's published description carries the hosted service's schemas for these shapes.
SCHEMAS = Path(__file__).resolve().parents[2] / "mnemo_tui" / "server" / "openapi.json"


def check_schema(value: object, name: str) -> None:
    """Validate a CLI JSON output against the hosted service's schema of the same wire shape."""
    import jsonschema

    document = json.loads(SCHEMAS.read_text())
    schema = {**document["components"]["schemas"][name], "components": document["components"]}
    jsonschema.validate(value, schema)


def test_rooms_outputs_are_exactly_as_documented(run_cli) -> None:
    created = run_cli("rooms", "create", "ops")
    assert created.code == 0 and created.stdout.startswith("xroom:room_") and created.stdout.count("\n") == 1
    doc = json.loads(run_cli("rooms", "create", "dev", "--description", "d", "-f", "json").stdout)
    assert set(doc) == {"room_id", "address", "name", "next_steps"} and doc["address"] == "xroom:" + doc["room_id"]
    check_schema(doc, "RoomCreatedSchema")
    code = run_cli("rooms", "invite", "ops", "--read-only", "--max-uses", "2", "--expires-days", "3")
    assert code.code == 0 and code.stdout.startswith("mnvr_") and code.stdout.count("\n") == 1
    invite = json.loads(run_cli("rooms", "invite", created.stdout.strip(), "-f", "json").stdout)
    assert {"code", "room_address", "invite_id", "scope", "expires_at", "join_url", "share_message"} <= set(invite)
    assert invite["scope"] == "read_write" and invite["room_address"] == created.stdout.strip()
    check_schema(invite, "InviteCreatedSchema")
    joined = run_cli("rooms", "join", code.stdout.strip(), env={"MNEMO_PRINCIPAL": "bob"})
    assert joined.code == 0 and joined.stdout == created.stdout
    again = json.loads(
        run_cli("rooms", "join", code.stdout.strip(), "-f", "json", env={"MNEMO_PRINCIPAL": "bob"}).stdout
    )
    assert again["already_member"] is True and again["scope"] == "read"
    check_schema(again, "JoinedRoomSchema")
    listed = json.loads(run_cli("rooms", "list", "-f", "json", env={"MNEMO_PRINCIPAL": "bob"}).stdout)
    assert listed == [
        {
            "room_id": created.stdout.strip().removeprefix("xroom:"),
            "name": "ops",
            "address": created.stdout.strip(),
            "role": "member",
            "scope": "read",
            "archived": False,
        }
    ]
    check_schema(listed[0], "RoomListItemSchema")
    ro = run_cli("write", "hi", "--scope", created.stdout.strip(), env={"MNEMO_PRINCIPAL": "bob"})
    assert ro.code == 4 and "read-only" in ro.stderr
    table = run_cli("rooms", "list").stdout
    assert table.splitlines()[0].split() == ["NAME", "ADDRESS", "ROLE", "ACCESS"] and "ops" in table


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("rooms", "create", ""), 2),
        (("rooms", "create", "x" * 201), 2),  # the hosted schema's bound: 200
        (("rooms", "invite", "no-such-room"), 4),
        (("rooms", "invite", "xroom:room_01ARZ3NDEKTSV4RRFFQ69G5FAV"), 4),
        (("rooms", "join", "mnvr_unknown"), 2),
        (("rooms", "join", "garbage"), 2),
        (("rooms", "list", "-f", "ndjson"), 2),
        (("vault", "add", "bad alias", "--context", "c"), 2),
        (("vault", "add", "ok"), 2),
        (("vault", "list", "-f", "ndjson"), 2),
        (("nonsense",), 2),
        (("recent", "--scope"), 2),
    ],
)
def test_bad_input_on_rooms_and_vault(run_cli, args: tuple[str, ...], code: int) -> None:
    r = run_cli(*args, input="value\n")
    assert r.code == code, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.strip()


def test_room_conflicts_are_exit_2(run_cli) -> None:
    run_cli("rooms", "create", "ops")
    taken = run_cli("rooms", "create", "ops")
    assert taken.code == 2 and "already have a room" in taken.stderr
    code = run_cli("rooms", "invite", "ops").stdout.strip()
    assert run_cli("rooms", "join", code, env={"MNEMO_PRINCIPAL": "bob"}).code == 0
    used = run_cli("rooms", "join", code, env={"MNEMO_PRINCIPAL": "carol"})
    assert used.code == 2 and "used up" in used.stderr
    for bad in (("--max-uses", "0"), ("--expires-days", "91"), ("--max-uses", "x")):
        assert run_cli("rooms", "invite", "ops", *bad).code == 2
    not_owner = run_cli("rooms", "invite", "ops", env={"MNEMO_PRINCIPAL": "bob"})
    assert not_owner.code == 4


def test_vault_never_shows_a_value(run_cli) -> None:
    added = run_cli("vault", "add", "deploy.key", "--context", "for deploys", input="s3cr3t-value\n")
    assert added.code == 0 and added.stdout == "deploy.key\n"
    empty = run_cli("vault", "add", "other", "--context", "c", input="")
    assert empty.code == 2 and "empty" in empty.stderr
    dup = run_cli("vault", "add", "deploy.key", "--context", "c", input="v\n")
    assert dup.code == 2
    doc = json.loads(run_cli("vault", "list", "-f", "json").stdout)
    assert [set(s) for s in doc["secrets"]] == [{"alias", "context", "created_at", "concepts"}]
    check_schema(doc, "ListSecretsResponse")
    outputs = [run_cli("vault", "list").stdout, json.dumps(doc), run_cli("recent", "--all", "-f", "json").stdout]
    for out in outputs:
        assert "s3cr3t" not in out
    assert "deploy.key" in outputs[0] and "for deploys" in outputs[0]


def test_an_unreadable_config_file_is_exit_6_naming_it(run_cli, isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text("profiles = [broken\n")
    for args in (("recent",), ("recent", "--format", "json"), ("status",), ("catchup",), ("write", "x")):
        r = run_cli(*args)
        assert r.code == 6, (args, r.stderr)
        assert str(isolated_home / "config.toml") in r.stderr and "move it aside" in r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""
    for args in (("--help",), ("recent", "--help"), ("watermark", "set", "--help")):
        helped = run_cli(*args)
        assert helped.code == 0 and "Usage: mnemo" in helped.stdout


def test_an_unreadable_state_database_is_exit_6_naming_it(run_cli, isolated_home: Path) -> None:
    (isolated_home / "state.db").write_bytes(b"this is not a database" * 100)
    for args in (("catchup",), ("watermark", "list"), ("watermark", "set", "now")):
        r = run_cli(*args)
        assert r.code == 6, (args, r.stderr)
        assert str(isolated_home / "state.db") in r.stderr and "Traceback" not in r.stderr
    assert run_cli("recent").code == 0  # reading the feed needs no state
    moved = run_cli("catchup", env={"MNEMO_STATE": str(isolated_home / "fresh-state.db")})
    assert moved.code == 0


def test_debug_adds_the_traceback(run_cli) -> None:
    plain = run_cli("recent", "--since", "bogus")
    assert plain.code == 2 and "Traceback" not in plain.stderr
    assert "Traceback" in run_cli("--debug", "recent", "--since", "bogus").stderr
    assert "Traceback" in run_cli("recent", "--since", "bogus", env={"MNEMO_DEBUG": "1"}).stderr
    assert "Traceback" in run_cli("--debug", "search", "").stderr


@pytest.mark.parametrize(
    "args",
    [
        ("catchup", "--format", "ndjson", "--limit", "1"),  # the fast path
        ("catchup", "-fndjson", "-n1"),  # Typer's path
    ],
)
def test_ctrl_c_mid_walk_is_130_and_commits_nothing(cli, isolated_home: Path, args: tuple[str, ...]) -> None:
    store = Store(isolated_home / "store.db")
    store.bulk_insert([("local", WriteRequest(f"entry {i}"), i + 1) for i in range(3000)])
    store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update({"MNEMO_HOME": str(isolated_home), "NO_COLOR": "1"})
    proc = subprocess.Popen([MNEMO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = [proc.stdout.readline() for _ in range(5)]
    assert [json.loads(line)["content"] for line in first] == [f"entry {2999 - i}" for i in range(5)]
    proc.send_signal(signal.SIGINT)
    _rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"interrupted" in err and b"Traceback" not in err
    assert cli("watermark", "show", "-f", "json").stdout == "null\n"
    # The interrupted walk can be finished: --resume continues from the last flushed page.
    resumed = json.loads(cli("catchup", "--resume", "-f", "json").stdout)
    assert resumed["resumed"] is True and resumed["watermark"]["after"]["boundary_ids"]
    assert len(resumed["items"]) < 3000


def test_a_closed_pipe_stops_quietly(isolated_home: Path) -> None:
    store = Store(isolated_home / "store.db")
    store.bulk_insert([("local", WriteRequest(f"entry {i}"), i + 1) for i in range(5000)])
    store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    for command in ("recent --all --format ndjson", "catchup --format ndjson"):
        proc = subprocess.run(
            f"{MNEMO} {command} | head -n 2",
            shell=True,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert len(proc.stdout.splitlines()) == 2
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    marks = subprocess.run(
        [MNEMO, "watermark", "list", "-f", "json"], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(marks.stdout) == []  # the cut-short catchup committed nothing


@pytest.mark.parametrize("args", [["recent", "--limit", "0", "--debug"], ["rooms", "invite", "nosuch", "--debug"]])
def test_debug_after_the_command_adds_the_traceback(run_cli: Any, args: list[str]) -> None:
    r = run_cli(*args)
    assert r.code in (2, 4) and "No such option" not in r.stderr
    assert "Traceback (most recent call last)" in r.stderr and r.stderr.rstrip().splitlines()[-1].startswith("mnemo: ")
    plain = run_cli(*[a for a in args if a != "--debug"])
    assert plain.code == r.code and "Traceback" not in plain.stderr and len(plain.stderr.splitlines()) == 1


def test_debug_after_a_double_dash_is_content(run_cli: Any) -> None:
    r = run_cli("write", "--", "--debug")
    assert r.code == 0
    assert json.loads(run_cli("recent", "--format", "json").stdout)["items"][0]["content"] == "--debug"


def test_a_store_or_state_under_a_file_says_how_to_recover(run_cli: Any, isolated_home: Path) -> None:
    blocker = isolated_home / "a-file"
    blocker.write_text("not a folder")
    r = run_cli("recent", env={"MNEMO_STORE": str(blocker / "store.db")})
    assert r.code == 6 and len(r.stderr.splitlines()) == 1
    assert str(blocker / "store.db") in r.stderr and "named by MNEMO_STORE" in r.stderr
    r = run_cli("write", "x", env={"MNEMO_STORE": str(blocker / "store.db")})
    assert r.code == 6 and len(r.stderr.splitlines()) == 1
    assert str(blocker / "store.db") in r.stderr and "its folder does not exist" in r.stderr
    r = run_cli("catchup", env={"MNEMO_STATE": str(blocker / "state.db")})
    assert r.code == 6 and len(r.stderr.splitlines()) == 1
    assert "cannot be opened" in r.stderr and "point MNEMO_STATE elsewhere" in r.stderr
    assert "Your watermarks are in it" not in r.stderr  # there is no file to move aside
