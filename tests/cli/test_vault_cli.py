"""`mnemo vault`: the context's limits (the hosted schema's), its list cut to the width, asking on a terminal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


def test_vault_list_clips_a_long_context_to_the_width(cli: Any) -> None:
    context = "a very long context sentence " * 10
    assert cli("vault", "add", "long.ctx", "--context", context, input="value\n").code == 0
    r = cli("vault", "list", columns=80)
    assert r.code == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ALIAS", "CREATED", "CONTEXT"]
    assert all(len(line) <= 80 for line in lines) and lines[1].endswith("…")
    # JSON keeps the whole context.
    assert json.loads(cli("vault", "list", "--format", "json").stdout)["secrets"][0]["context"] == context


def test_vault_context_takes_what_the_hosted_schema_allows(run_cli: Any) -> None:
    # CreateSecretRequest.context: maxLength 10000 (the engine refused anything over 2000).
    assert run_cli("vault", "add", "long.ok", "--context", "c" * 10_000, input="v\n").code == 0
    listed = json.loads(run_cli("vault", "list", "--format", "json").stdout)["secrets"]
    assert [len(s["context"]) for s in listed if s["alias"] == "long.ok"] == [10_000]
    r = run_cli("vault", "add", "long.no", "--context", "c" * 10_001, input="v\n")
    assert r.code == 2 and r.stderr.strip() == "mnemo: --context is at most 10000 characters, got 10001"


def test_server_vault_context_takes_what_the_hosted_schema_allows(run_cli: Any, isolated_home: Path) -> None:
    import httpx

    from tests.support.wire import served_store

    key = run_cli("keys", "create", "local").stdout.strip()
    with served_store(isolated_home / "store.db") as server:
        body = {"alias": "ctx5000", "context": "c" * 5000, "sealed_secret_b64": "eA=="}
        r = httpx.post(server.url + "/vault/secrets", json=body, headers={"X-Api-Key": key})
        assert r.status_code == 200 and r.json()["alias"] == "ctx5000"


def test_vault_add_asks_for_a_missing_context_on_a_terminal(cli: Cli, isolated_home: Path) -> None:
    from tests.support.cli import in_terminal
    from tests.support.keyrings import subprocess_env

    env = subprocess_env(isolated_home / "test-keyring.json")
    turns = [("shown in listings)? ", "token of the deploy bot\n"), ("(hidden): ", "s3cret\n")]
    shown = in_terminal(isolated_home, ["vault", "add", "deploy"], env=env, turns=turns)
    assert "What is deploy for (its --context, shown in listings)?" in shown and "s3cret" not in shown
    secrets = json.loads(cli("vault", "list", "-f", "json").stdout)["secrets"]
    assert [(s["alias"], s["context"]) for s in secrets] == [("deploy", "token of the deploy bot")]
    assert cli("vault", "get", "deploy").stdout == "s3cret\n"
    piped = cli("vault", "add", "other", input="v\n")  # no terminal to ask on: the usage error
    assert piped.code == 2 and "Missing option '--context'" in piped.stderr
