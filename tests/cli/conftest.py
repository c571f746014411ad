"""Fixtures of the CLI's tests (in this process, on `run_cli`): a seeded demo store, and the same store served
by `mnemo serve`'s app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def demo(run_cli: Any) -> Any:
    """A small seeded demo store: own domains, two rooms, a secret; `run_cli` to run commands on it."""
    r = run_cli("demo", "--entries", "40", "--seed", "7")
    assert r.code == 0, r.stderr
    return run_cli


@pytest.fixture
def remote(run_cli: Any, isolated_home: Path) -> Iterator[Any]:
    """`run_cli` pointed at the demo store served by the app `mnemo serve` runs, with a key of `local`."""
    from tests.support.wire import served_store

    assert run_cli("demo", "--entries", "40", "--seed", "7").code == 0
    key = run_cli("keys", "create", "local").stdout.strip()
    with served_store(isolated_home / "store.db") as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key}

        def run(*args: str, **kw: Any) -> Any:
            return run_cli(*args, env={**env, **kw.pop("env", {})}, **kw)

        yield run
