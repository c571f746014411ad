"""The module-scoped `servers` fixture: `mnemo mcp` processes and their clients on one event loop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from anyio.from_thread import start_blocking_portal

from tests.support.mcp_client import Servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    home = tmp_path_factory.mktemp("mcp-home")
    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal())
        yield Servers(stack, portal, home)
