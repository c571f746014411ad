"""The server tests' fixtures: the recorder of `recorder.py` checks every test's answers against openapi.json."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server import recorder

recorder.install()


@pytest.fixture(autouse=True)
def declared_statuses_only() -> Iterator[None]:
    """Fails the test (at its teardown) when an answer it got carries a status openapi.json does not declare."""
    recorder.seen.clear()
    yield
    wrong = recorder.undeclared(list(recorder.seen))
    recorder.seen.clear()
    if wrong:
        pytest.fail("answers openapi.json does not declare (scripts/openapi.py):\n" + "\n".join(wrong))
