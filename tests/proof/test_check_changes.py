"""`mnemo check` leaves nothing for any other reader: no catch-up of a scope it did not name, the unscoped one
included, reports its probes (as entries or as removals); real removals are still reported. Embedded and
against a real `mnemo serve`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import start_serve

Cli = Callable[..., Any]


def _changes(cli: Cli, env: dict[str, str], *scope: str) -> dict[str, Any]:
    r = cli("catchup", "--changes", "--consumer", "reader", "--format", "json", *scope, env=env)
    assert r.code == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def _scenario(cli: Cli, env: dict[str, str]) -> None:
    kept = cli("write", "kept", "--scope", "notes", env=env).stdout.strip()
    gone = cli("write", "to be deleted", "--scope", "notes", env=env).stdout.strip()
    assert kept and gone
    for scope in ((), ("--scope", "notes"), ("--scope", "mnemo-check")):
        _changes(cli, env, *scope)  # each reader's watermark, before the check runs
    assert cli("delete", gone, "--yes", env=env).code == 0
    for _ in range(2):  # two runs: the issue saw 16 rows after two
        checked = cli("check", env=env)
        assert checked.code == 0, checked.stdout + checked.stderr
        assert "probe entries go to room xroom:" in checked.stdout and "note:" not in checked.stderr
    unscoped = _changes(cli, env)
    assert [r["atom_id"] for r in unscoped["removed"]] == [gone]  # the real removal, and only it
    assert unscoped["items"] == []
    assert [r["atom_id"] for r in _changes(cli, env, "--scope", "notes")["removed"]] == [gone]
    domain = _changes(cli, env, "--scope", "mnemo-check")
    assert domain["removed"] == [] and domain["items"] == []


def test_check_leaves_no_removal_in_any_catchup_it_did_not_name_embedded(cli: Cli) -> None:
    _scenario(cli, {})


def test_check_leaves_no_removal_in_any_catchup_it_did_not_name_against_mnemo_serve(
    cli: Cli, isolated_home: Path, tmp_path: Path
) -> None:
    key = cli("keys", "create", "ci-bot").stdout.strip()
    served = start_serve(isolated_home)
    try:
        _scenario(cli, {"MNEMO_ENDPOINT": served.url, "MNEMO_API_KEY": key, "MNEMO_STATE": str(tmp_path / "s.db")})
    finally:
        served.stop()


@pytest.mark.parametrize("flag", ["--scope", "--no-probe-room"])
def test_probes_in_an_own_domain_say_that_unscoped_changes_will_show_them(cli: Cli, flag: str) -> None:
    args = ("--scope", "probes") if flag == "--scope" else ("--no-probe-room",)
    checked = cli("check", *args)
    assert checked.code == 0, checked.stdout + checked.stderr
    assert "probe entries go to domain" in checked.stdout
    assert "an unscoped `mnemo catchup --changes` reports their removal" in checked.stderr
