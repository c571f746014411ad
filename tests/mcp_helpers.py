"""`mnemo mcp` under the official `mcp` client: a real subprocess over stdio, driven from synchronous tests
(the `servers` fixture of tests/agents/conftest.py).

One event loop runs in a thread (anyio's blocking portal); each `Session` is one `mnemo mcp` process with its
client connected, shared by a module's tests.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal
from mcp import Client
from mcp.client.stdio import StdioServerParameters

MNEMO = str(Path(sys.executable).with_name("mnemo"))


class Session:
    """One `mnemo mcp` process and its connected client."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client

    def call(self, tool: str, **arguments: Any) -> tuple[bool, str]:
        """(is_error, text) of one tool call."""
        result = self.portal.call(self.client.call_tool, tool, arguments)
        assert len(result.content) == 1
        return bool(result.is_error), result.content[0].text  # type: ignore[union-attr]

    def ok(self, tool: str, **arguments: Any) -> str:
        error, text = self.call(tool, **arguments)
        assert not error, text
        return text

    def refused(self, tool: str, **arguments: Any) -> str:
        error, text = self.call(tool, **arguments)
        assert error, text
        return text

    def list_tools(self) -> Any:
        return self.portal.call(self.client.list_tools)

    def get_prompt(self, name: str, arguments: dict[str, str]) -> Any:
        return self.portal.call(self.client.get_prompt, name, arguments)

    def list_prompts(self) -> Any:
        return self.portal.call(self.client.list_prompts)

    def list_templates(self) -> Any:
        return self.portal.call(self.client.list_resource_templates)

    def read_resource(self, uri: str) -> Any:
        return self.portal.call(self.client.read_resource, uri)


def server_env(home: Path, principal: str) -> dict[str, str]:
    """Only what the server needs: no developer config, state or key reaches it."""
    return {"PATH": os.environ.get("PATH", ""), "MNEMO_HOME": str(home), "MNEMO_PRINCIPAL": principal, "NO_COLOR": "1"}


class Servers:
    """Starts `mnemo mcp` processes on one event loop; all closed together."""

    def __init__(self, stack: ExitStack, portal: BlockingPortal, home: Path) -> None:
        self.stack, self.portal, self.home = stack, portal, home

    def start(self, *args: str, principal: str = "alice", env: dict[str, str] | None = None) -> Session:
        params = StdioServerParameters(
            command=MNEMO, args=[*args, "mcp"], env=server_env(self.home, principal) | (env or {})
        )
        client = self.stack.enter_context(self.portal.wrap_async_context_manager(Client(params)))
        return Session(self.portal, client)
