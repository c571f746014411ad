"""`mnemo keys` and `mnemo serve` say what they did, and what is missing for a client to reach the server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


def test_keys_revoke_confirms_on_stderr(run_cli: Any) -> None:
    assert run_cli("keys", "create", "alice").code == 0
    key_id = json.loads(run_cli("keys", "list", "--format", "json").stdout)[0]["key_id"]
    r = run_cli("keys", "revoke", key_id)
    assert r.code == 0 and r.stdout == "" and f"Key {key_id} revoked" in r.stderr


def test_serve_warns_when_no_key_can_reach_it(run_cli: Any, isolated_home: Path) -> None:
    import signal

    from tests.support.serve import start_serve

    served = start_serve(isolated_home)
    code, log = served.stop(signal.SIGTERM)
    assert code == 0 and "no active API key yet" in log and "mnemo keys create PRINCIPAL" in log
    assert run_cli("keys", "create", "alice").code == 0
    served = start_serve(isolated_home)
    code, log = served.stop(signal.SIGTERM)
    assert code == 0 and "no active API key" not in log and "ready at" in log
