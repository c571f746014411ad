"""Provides the `mnemo mcp` command: an MCP server over stdio on the selected backend (the `mcp` extra)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui.cli.commands import ctx_of
from mnemo_tui.cli.context import needs_extra

if TYPE_CHECKING:
    from mnemo_tui.backends import Backend


def mcp(
    ctx: typer.Context,
    agent_name: Annotated[
        str | None,
        typer.Option("--agent-name", metavar="NAME", help="The agent name every write records (provenance)."),
    ] = None,
) -> None:
    """Serve the memory tools to an MCP client over stdio (the hosted package's ten tools, on this backend).

    Only the protocol goes to stdout; messages go to stderr. Needs the `mcp` extra.
    """
    with needs_extra("mcp", "mnemo mcp"):
        from mnemo_tui.agents.sdk import serve
    from mnemo_tui.errors import AuthError

    c = ctx_of(ctx, creates_store=True)  # memory_write creates the store, as `mnemo write` does
    try:
        backend: Backend | AuthError = c.backend
    except AuthError as exc:
        # No key for the endpoint: an agent host that sees the process exit shows a dead server, so the
        # handshake still happens and every tool call says how to give a key.
        sys.stderr.write(f"mnemo mcp: {exc}\n")
        backend = exc
    serve(backend, agent_name)
