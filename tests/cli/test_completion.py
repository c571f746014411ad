"""Shell completion offers values from local state only: no endpoint contacted, no key asked for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)
Cli = Callable[..., Any]


def _complete(cli: Cli, *words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash completion offers for the last of `words` (an empty last word: after a space)."""
    line = {"COMP_WORDS": " ".join(words), "COMP_CWORD": str(len(words) - 1), "_MNEMO_COMPLETE": "complete_bash"}
    r = cli(env={**line, **(env or {})})
    assert r.code == 0 and r.stderr == "", r.stderr
    return r.stdout.split()


def test_values_complete_from_local_state_only(run_cli: Cli, isolated_home: Path) -> None:
    import socket

    assert _complete(run_cli, "mnemo", "recent", "--format", "") == ["table", "json", "ndjson"]
    assert _complete(run_cli, "mnemo", "rooms", "list", "-f", "") == ["table", "json"]
    assert _complete(run_cli, "mnemo", "catchup", "--consumer", "") == ["default"]  # the configured one
    assert not (isolated_home / "state.db").exists() and not (isolated_home / "store.db").exists()
    assert run_cli("write", "x", "--scope", "ops").code == 0 and run_cli("write", "y", "--scope", "ci").code == 0
    address = run_cli("rooms", "create", "design").stdout.strip()
    assert _complete(run_cli, "mnemo", "recent", "--scope", "") == sorted(["ci", "design", "ops", address])
    assert _complete(run_cli, "mnemo", "search", "q", "-s", "o") == ["ops"]
    assert run_cli("catchup", "--consumer", "nightly", "--scope", "ops").code == 0
    assert _complete(run_cli, "mnemo", "watermark", "show", "-c", "") == ["default", "nightly"]
    # An endpoint is never contacted and no key is asked for: its scopes are those its watermarks name.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}/api/v1"
        assert _complete(run_cli, "mnemo", "--endpoint", endpoint, "recent", "--scope", "") == []
        assert _complete(run_cli, "mnemo", "--endpoint", endpoint, "catchup", "-c", "n") == ["nightly"]
        with pytest.raises(BlockingIOError):
            listener.accept()
