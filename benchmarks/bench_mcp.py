"""Provides the MCP start-up benchmark: `mnemo mcp` to its first answered `tools/list`, against a bare SDK server.

Both servers are started the same way and asked the same three messages (initialize, initialized,
tools/list) by the same minimal JSON-RPC client over pipes; the figure is the wall time from the spawn to
the `tools/list` answer, alternated with the anchor, median of pair ratios.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
MNEMO = shutil.which("mnemo", path=str(BIN)) or "mnemo"

# The anchor: the official SDK's low-level server with one tool, served over stdio as `mnemo mcp` serves.
BARE = """
import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

async def list_tools(ctx, params):
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="echo", description="Echo.", input_schema=schema)])

async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(params.arguments))])

server = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)

async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""

_HELLO = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]


def first_tools_list(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Seconds from the spawn to the answer of `tools/list`, and how many tools it listed."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in _HELLO))
    proc.stdin.flush()
    try:
        for line in proc.stdout:
            answer = json.loads(line)
            if answer.get("id") == 2:
                elapsed = time.perf_counter() - started
                return elapsed, len(answer["result"]["tools"])
        raise RuntimeError(f"{cmd[0]} closed stdout before answering tools/list")
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def _compiled() -> None:
    """Byte code for the package measured, as an install has it (the SDK's was written by pip)."""
    import mnemo_tui

    package = str(Path(mnemo_tui.__file__).resolve().parent)
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, capture_output=True)


def startup(reps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-mcp-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(MNEMO_HOME=home, NO_COLOR="1")
        bare_py = Path(home) / "bare.py"
        bare_py.write_text(BARE, encoding="utf-8")
        store = Path(home) / "store.db"
        mnemo = [MNEMO, "--store", str(store), "mcp"]
        bare = [sys.executable, str(bare_py)]
        subprocess.run(
            [MNEMO, "--store", str(store), "write", "warm-up entry"], env=env, check=True, capture_output=True
        )
        for _ in range(2):
            assert first_tools_list(mnemo, env)[1] == 10
            assert first_tools_list(bare, env)[1] == 1
        ta, tb, ratios = [], [], []
        for _ in range(reps):
            a = first_tools_list(mnemo, env)[0]
            b = first_tools_list(bare, env)[0]
            ta.append(a)
            tb.append(b)
            ratios.append(a / b)
    return {
        "name": "`mnemo mcp` (embedded store) to its first answered `tools/list`",
        "value": round(statistics.median(ta) * 1000, 1),
        "unit": "ms",
        "anchor": round(statistics.median(tb) * 1000, 1),
        "ratio": round(statistics.median(ratios), 2),
        "goal": "≤ 1.5x",
        "anchor_is": "a bare `mcp` SDK low-level server with one tool, same client (median of alternated pairs)",
    }


def answers(reps: int) -> list[dict[str, Any]]:
    """A 100-entry page and a 50-match search as `mnemo mcp` words them (budgeted, sanitized), in process,
    against the same backend calls alone (the page's ten sub-requests of ten; the one search), best of `reps`."""
    from mnemo_tui.agents.answers import Answers
    from mnemo_tui.backends.local import LocalBackend
    from mnemo_tui.values.model import RecentQuery
    from mnemo_tui.values.search import SearchQuery
    from mnemo_tui.values.writes import WriteRequest

    def best(call: Any) -> float:
        times = []
        for _ in range(reps):
            started = time.perf_counter()
            call()
            times.append(time.perf_counter() - started)
        return min(times)

    def pages(backend: LocalBackend) -> None:
        cursor = None
        for _ in range(10):
            cursor = backend.recent(RecentQuery(scope="d", limit=10, cursor=cursor)).next_cursor

    with tempfile.TemporaryDirectory(prefix="mnemo-bench-answers-") as home:
        backend = LocalBackend.open(Path(home) / "store.db", "bench")
        for i in range(1_000):
            backend.write(WriteRequest(f"entry {i} " + "word " * 60, domain="d", concepts=("deploy", "ops")))
        words = Answers(backend)
        rows = []
        for name, worded, anchor in (
            ("memory_list_recent, limit 100", lambda: words.memory_list_recent(domain="d", limit=100), pages),
            (
                "memory_read, top_k 50",
                lambda: words.memory_read(query="entry word", domain="d", top_k=50),
                lambda b: b.search(SearchQuery("entry word", scope="d", top_k=50)),
            ),
        ):
            a, b = best(worded), best(functools.partial(anchor, backend))
            rows.append(
                {
                    "name": f"`mnemo mcp` {name}: the answer's text (budgeted, sanitized)",
                    "value": round(a * 1000, 2),
                    "unit": "ms",
                    "anchor": round(b * 1000, 2),
                    "ratio": round(a / b, 2),
                    "anchor_is": "the same backend calls, no wording (best of the runs)",
                }
            )
        backend.close()
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    _compiled()
    return [startup(7 if quick else 21), *answers(10 if quick else 30)]


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(row)
