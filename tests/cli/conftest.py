"""Fixtures of the CLI's tests: a seeded demo store, and the same store served by `mnemo serve`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def demo(cli: Any) -> Any:
    """A small seeded demo store: own domains, two rooms, a secret."""
    r = cli("demo", "--entries", "40", "--seed", "7")
    assert r.code == 0, r.stderr
    return cli


@pytest.fixture
def remote(cli: Any, isolated_home: Path) -> Iterator[Any]:
    """`cli` pointed at the demo store served by the app `mnemo serve` runs, with a key of `local`."""
    from tests.support.wire import served_store

    assert cli("demo", "--entries", "40", "--seed", "7").code == 0
    key = cli("keys", "create", "local").stdout.strip()
    with served_store(isolated_home / "store.db") as server:
        env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key}

        def run(*args: str, **kw: Any) -> Any:
            return cli(*args, env={**env, **kw.pop("env", {})}, **kw)

        yield run
