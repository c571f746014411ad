"""Fixtures of the TUI tests: atom ids drawn from a fixed sequence, so that pictures showing short ids are stable;
a store served by a real `mnemo serve` app on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.engine import ids
from mnemo_tui.engine.sqlite.store import Store
from tests.support.wire import ThreadServer, served_store


@pytest.fixture(autouse=True)
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Atom ids from a seeded sequence, as the clock is fixed: the same store gives the same short ids.

    The ids stay unique, well-formed and unordered in time (a hash of a counter), as random ones are.
    """
    numbers = count(1)
    monkeypatch.setattr(ids, "atom_id", lambda: str(uuid.uuid5(uuid.NAMESPACE_OID, f"mnemo-test-{next(numbers)}")))
    yield


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ThreadServer, LocalBackend, str]]:
    """A store served on loopback: the server, a backend of `alice` on the store itself, and an API key of hers."""
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    with served_store(path) as server:
        yield server, LocalBackend(store, "alice"), key
    store.close()
