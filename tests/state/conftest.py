"""The state tests' fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import keyring
import pytest

from tests.support.keyrings import MemoryKeyring


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    """A keyring in memory for this test (the one before it is put back after)."""
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)
