"""Feed subscriptions of `mnemo mcp` over stdio on the embedded store, under the official `mcp` client in both
revisions: writes by other processes (the CLI) are heard as the embedded follow hears them (its change
token), and the server's own; none for another scope.

"None" is never waited for: the silent write comes first, then two to a sentinel scope, each awaited."""

from __future__ import annotations

import json
import queue
import subprocess
import warnings
from contextlib import ExitStack
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.support.mcp_client import MNEMO, WAIT, Heard, Servers, server_env

warnings.filterwarnings("ignore", message=".*resources/(un)?subscribe is removed.*")


def start(stack: ExitStack, portal: BlockingPortal, home: Path, store: Path, mode: str, heard: Heard | None) -> Client:
    params = StdioServerParameters(command=MNEMO, args=["--store", str(store), "mcp"], env=server_env(home, "alice"))
    client: Client = stack.enter_context(
        portal.wrap_async_context_manager(Client(params, mode=mode, message_handler=heard))
    )
    return client


def cli_write(home: Path, store: Path, content: str, scope: str) -> None:
    env = server_env(home, "alice")
    subprocess.run(
        [MNEMO, "--store", str(store), "write", content, "--scope", scope], env=env, check=True, capture_output=True
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stdio-subscriptions") / "store.db"


def test_a_session_hears_the_clis_writes_and_its_own_and_not_another_scope(servers: Servers, store: Path) -> None:
    heard = Heard()
    client = start(servers.stack, servers.portal, servers.home, store, "legacy", heard)
    assert client.server_capabilities.resources is not None and client.server_capabilities.resources.subscribe
    uri, sentinel = "memory://feed/stdio%2Fsubs", "memory://feed/stdio-sentinel"
    for u in (uri, sentinel):
        servers.portal.call(client.subscribe_resource, u)
    cli_write(servers.home, store, "elsewhere", "stdio")  # another scope: silent
    for n in range(2):
        cli_write(servers.home, store, f"sentinel {n}", "stdio-sentinel")
        assert heard.next() == sentinel
    cli_write(servers.home, store, "from the CLI", "stdio/subs")  # another process
    assert heard.next() == uri
    written = servers.portal.call(client.call_tool, "memory_write", {"content": "own", "domain": "stdio/subs"})
    assert not written.is_error
    assert heard.next() == uri  # the server's own write


def test_a_listen_stream_hears_the_cli(servers: Servers, store: Path) -> None:
    with ExitStack() as stack:
        client = start(stack, servers.portal, servers.home, store, "auto", None)
        assert client.server_capabilities.resources is not None and client.server_capabilities.resources.subscribe
        got: queue.Queue[str] = queue.Queue()
        acked: queue.Queue[object] = queue.Queue()

        async def listen() -> None:
            async with client.listen(resource_subscriptions=["memory://feed"]) as subscription:
                acked.put(subscription.honored)
                async for event in subscription:
                    got.put(event.uri)  # type: ignore[union-attr]

        future = servers.portal.start_task_soon(listen)
        acked.get(timeout=WAIT)
        cli_write(servers.home, store, "anything", "listened")
        assert got.get(timeout=WAIT) == "memory://feed"
        future.cancel()


def test_stdins_end_answers_an_open_listen_stream_and_the_process_exits(servers: Servers, store: Path) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    listen = {
        "jsonrpc": "2.0",
        "id": "l1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"resourceSubscriptions": ["memory://feed"]}, "_meta": meta},
    }
    process = subprocess.Popen(
        [MNEMO, "--store", str(store), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=server_env(servers.home, "alice"),
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(listen) + "\n")
    process.stdin.flush()
    acked = json.loads(process.stdout.readline())
    assert acked["method"] == "notifications/subscriptions/acknowledged"
    assert acked["params"]["notifications"] == {"resourceSubscriptions": ["memory://feed"]}
    process.stdin.close()  # the client is gone: the stream ends with its result, not after the calls' grace
    answered = json.loads(process.stdout.readline())
    assert answered["id"] == "l1" and "result" in answered
    assert process.wait(timeout=WAIT) == 0
