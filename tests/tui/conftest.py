"""Fixtures of the TUI tests: atom ids drawn from a fixed sequence, so that pictures showing short ids are stable."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from itertools import count

import pytest

from mnemo_tui.engine import ids


@pytest.fixture(autouse=True)
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Atom ids from a seeded sequence, as the clock is fixed: the same store gives the same short ids.

    The ids stay unique, well-formed and unordered in time (a hash of a counter), as random ones are.
    """
    numbers = count(1)
    monkeypatch.setattr(ids, "atom_id", lambda: str(uuid.uuid5(uuid.NAMESPACE_OID, f"mnemo-test-{next(numbers)}")))
    yield
