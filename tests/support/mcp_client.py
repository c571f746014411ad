"""`mnemo mcp` under the official `mcp` client: a real subprocess over stdio, driven from synchronous tests
(the `servers` fixture of tests/agents/conftest.py).

One event loop runs in a thread (anyio's blocking portal); each `Session` is one `mnemo mcp` process with its
client connected, shared by a module's tests.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal
from mcp import Client
from mcp.client.stdio import StdioServerParameters

MNEMO = str(Path(sys.executable).with_name("mnemo"))
WAIT = 120  # seconds any one expected event may take on a loaded machine (a bound, never a pause)


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


class HoldingProxy:
    """A loopback TCP proxy to `upstream` that forwards requests at once and holds the answers while closed."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.passing = threading.Event()
        self.passing.set()
        self.sent: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, outbound: bool) -> None:
        try:
            while data := source.recv(65536):
                if outbound:
                    self.sent.put(data)
                else:
                    self.passing.wait()
                target.sendall(data)
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def wait_for_request(self, path: bytes) -> None:
        """Until a request for `path` has gone upstream (bounded)."""
        while True:
            try:
                data = self.sent.get(timeout=WAIT)
            except queue.Empty:
                raise AssertionError(f"no request for {path!r} in {WAIT} s") from None
            if path in data:
                return

    def close(self) -> None:
        self.passing.set()
        self.listener.close()


def listen_request(key: str, uris: list[str]) -> tuple[dict[str, str], bytes]:
    """The headers and body of a raw 2026-07-28 `subscriptions/listen` of `uris` to `/mcp` (no session)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"resourceSubscriptions": uris},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "authorization": f"Bearer {key}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "subscriptions/listen",
    }
    return headers, json.dumps(body).encode()


def http_client(headers: dict[str, str]) -> Any:
    """An HTTP client for the SDK's streamable HTTP transport, as the SDK makes its own (the SDK's client library,
    httpx2; 30 s to connect, write and pool, 300 s to read: a stream may stay open), with these headers."""
    import httpx2

    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))


class Heard:
    """The `notifications/resources/updated` one client received, in order."""

    def __init__(self) -> None:
        self.uris: queue.Queue[str] = queue.Queue()

    async def __call__(self, message: Any) -> None:
        import mcp_types as types

        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.put(message.params.uri)

    def next(self) -> str:
        return self.uris.get(timeout=WAIT)

    def empty(self) -> bool:
        return self.uris.empty()
