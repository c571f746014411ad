"""Rooms, the vault, supersession and search through the installed `mnemo`, with the exit codes of docs/cli.md."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.errors import Conflict
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


def as_(principal: str) -> dict[str, str]:
    return {"MNEMO_PRINCIPAL": principal}


def test_room_lifecycle_and_membership_exit_codes(run_cli: Cli) -> None:
    created = run_cli("rooms", "create", "design", env=as_("alice"))
    assert created.code == 0, created.stderr
    address = created.stdout.strip()
    assert re.fullmatch(r"xroom:room_[0-9A-HJKMNP-TV-Z]{26}", address)
    assert run_cli("rooms", "create", "design", env=as_("alice")).code == 2  # name taken
    code = run_cli("rooms", "invite", "design", env=as_("alice")).stdout.strip()
    assert code.startswith("mnvr_")
    joined = run_cli("rooms", "join", code, env=as_("bob"))
    assert joined.code == 0 and joined.stdout.strip() == address
    assert run_cli("rooms", "join", code, env=as_("carol")).code == 2  # used up (1 use by default)
    assert run_cli("rooms", "join", "mnvr_unknown", env=as_("carol")).code == 2
    read_only = run_cli("rooms", "invite", address, "--read-only", "--format", "json", env=as_("alice"))
    invite = json.loads(read_only.stdout)
    assert invite["scope"] == "read" and invite["room_address"] == address and invite["code"].startswith("mnvr_")
    assert run_cli("rooms", "join", invite["code"], env=as_("carol")).code == 0
    assert run_cli("rooms", "invite", address, env=as_("bob")).code == 4  # not the owner
    bob_wrote = run_cli("write", "bob was here", "--scope", address, env=as_("bob"))
    assert bob_wrote.code == 0
    carol_writes = run_cli("write", "carol tries", "--scope", address, env=as_("carol"))
    assert carol_writes.code == 4 and "Traceback" not in carol_writes.stderr
    outsider = run_cli("recent", "--scope", address, env=as_("dave"))
    unknown = run_cli("recent", "--scope", "xroom:room_01ARZ3NDEKTSV4RRFFQ69G5FAV", env=as_("dave"))
    assert outsider.code == unknown.code == 4
    assert outsider.stderr == unknown.stderr
    items = [
        json.loads(line)
        for line in run_cli("recent", "--scope", address, "--format", "ndjson", env=as_("carol")).stdout.splitlines()
    ]
    assert [i["content"] for i in items] == ["bob was here"]
    assert items[0]["provenance"]["principal"] == "bob"
    listing = json.loads(run_cli("rooms", "list", "--format", "json", env=as_("carol")).stdout)
    assert listing == [
        {
            "room_id": address[6:],
            "name": "design",
            "address": address,
            "role": "member",
            "scope": "read",
            "archived": False,
        }
    ]


def test_unscoped_empty_answer_names_the_rooms_in_every_format(run_cli: Cli) -> None:
    address = run_cli("rooms", "create", "design", env=as_("alice")).stdout.strip()
    table = run_cli("recent", env=as_("alice"))
    assert address in table.stdout and "Re-run with --scope" in table.stdout
    body = json.loads(run_cli("recent", "--format", "json", env=as_("alice")).stdout)
    assert body["empty_report"]["unsearched_rooms"] == [{"name": "design", "address": address}]
    nd = run_cli("recent", "--format", "ndjson", env=as_("alice"))
    assert nd.stdout == "" and address in nd.stderr
    scoped = json.loads(run_cli("recent", "--scope", "general", "--format", "json", env=as_("alice")).stdout)
    assert scoped["empty_report"]["unsearched_rooms"] == []


def test_expired_invite_is_refused(tmp_path: Path) -> None:
    backend = LocalBackend.open(tmp_path / "s.db", "alice")
    room = backend.create_room("ops")
    invite = backend.invite(room.address)
    backend.engine.db.execute("UPDATE invites SET expires_at = 0")
    with pytest.raises(Conflict):
        backend.engine.join("bob", invite.code)
    backend.close()


def test_vault_values_never_appear_in_any_output(run_cli: Cli) -> None:
    value = "s3cr3t-VALUE-do-not-print"
    added = run_cli("vault", "add", "deploy-token", "--context", "CI deploys", input=value + "\n")
    assert added.code == 0 and added.stdout.strip() == "deploy-token"
    assert run_cli("vault", "add", "bad alias!", "--context", "x", input="v").code == 2
    assert run_cli("vault", "add", "empty", "--context", "x", input="").code == 2
    run_cli("write", "deploy-token rotated by the CI job")
    outputs = [
        run_cli("vault", "list"),
        run_cli("vault", "list", "--format", "json"),
        *(run_cli("recent", "--format", f) for f in ("table", "json", "ndjson")),
        *(run_cli("search", "deploy-token", "--format", f) for f in ("table", "json", "ndjson")),
        run_cli("catchup", "--format", "json"),
    ]
    # Searching for the value itself finds nothing: the vault is not searchable.
    assert json.loads(run_cli("search", value, "--format", "json").stdout)["items"] == []
    listing = json.loads(outputs[1].stdout)
    assert listing["secrets"][0]["alias"] == "deploy-token" and listing["secrets"][0]["context"] == "CI deploys"
    for result in outputs:
        assert value not in result.stdout and value not in result.stderr


def test_write_supersedes_and_include_history(run_cli: Cli) -> None:
    old = run_cli("write", "staging on Railway").stdout.strip()
    new = run_cli("write", "staging on Fly.io", "--supersedes", old).stdout.strip()
    live = [json.loads(line) for line in run_cli("recent", "--format", "ndjson").stdout.splitlines()]
    assert [i["atom_id"] for i in live] == [new] and live[0]["supersedes"] == [old]
    history = [
        json.loads(line) for line in run_cli("recent", "--include-history", "--format", "ndjson").stdout.splitlines()
    ]
    assert [i["atom_id"] for i in history] == [new, old]
    assert history[1]["superseded_by"] == new
    missing = run_cli("write", "x", "--supersedes", "00000000-0000-4000-8000-000000000000")
    assert missing.code == 2 and "Traceback" not in missing.stderr


def test_search_refuses_an_empty_query_and_finds_hostile_text(run_cli: Cli) -> None:
    empty = run_cli("search", "  ")
    assert empty.code == 2 and "mnemo recent" in empty.stderr
    target = run_cli("write", "fixed the c++ build-bot crash").stdout.strip()
    for text in ("c++", "build-bot", '"crash'):
        body = json.loads(run_cli("search", text, "--format", "json").stdout)
        assert [i["atom_id"] for i in body["items"]] == [target]
        assert body["query"] == text and body["scope"] is None
        assert 0 <= body["items"][0]["relevance"] <= 1
    assert run_cli("search", "x", "--order-by", "magic").code == 2
