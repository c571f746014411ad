"""Provides the serve and keys commands: the embedded store over REST, and the API keys of its principals."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from mnemo_tui.engine.store import Store

keys_app = typer.Typer(
    help="API keys of `mnemo serve` (embedded store only): create, list, revoke.",
    short_help="API keys of `mnemo serve`: create, list, revoke.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _store(ctx: typer.Context, command: str) -> Store:
    from mnemo_tui.backends.local import LocalBackend
    from mnemo_tui.cli.app import ctx_of

    c = ctx_of(ctx)
    c.embedded_only(command)
    backend = c.backend
    assert isinstance(backend, LocalBackend)
    return backend.store


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Address to bind; loopback unless told otherwise.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="TCP port (0 picks a free one).")] = 8765,
) -> int:
    """Serve the embedded store over REST (WIRE.md) until Ctrl-C or SIGTERM."""
    from mnemo_tui.cli.app import ctx_of
    from mnemo_tui.errors import ValidationError

    c = ctx_of(ctx)
    c.embedded_only("serve")
    if not 0 <= port <= 65535:
        raise ValidationError(f"--port must be between 0 and 65535, got {port}")
    try:
        from mnemo_tui.server.run import serve as run_server
    except ImportError as exc:
        raise ValidationError(
            f"`mnemo serve` needs the server extra ({exc.name} is missing): pip install 'mnemo-tui[server]'"
        ) from None
    assert c.settings.store_path is not None
    from mnemo_tui.engine import rooms

    if not any(not k["revoked"] for k in rooms.list_keys(_store(ctx, "serve"))):
        sys.stderr.write(
            "mnemo serve: no active API key yet, so every call but /health will be refused (401); "
            "issue one with `mnemo keys create PRINCIPAL`\n"
        )
    try:
        return run_server(c.settings.store_path, host, port)
    except OSError as exc:
        raise ValidationError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None


def keys_create(
    ctx: typer.Context,
    principal: Annotated[
        str, typer.Argument(metavar="PRINCIPAL", help="Who the key acts as (provenance.principal of its writes).")
    ],
) -> None:
    """Issue a key for a principal; prints the mk_live_ key once (only its hash is kept)."""
    from mnemo_tui.engine import rooms

    _key_id, key = rooms.create_key(_store(ctx, "keys create"), principal)
    sys.stdout.write(key + "\n")


def keys_list(
    ctx: typer.Context,
    fmt: Annotated[str, typer.Option("--format", "-f", metavar="FORMAT", help="table or json.")] = "table",
) -> None:
    """Every key's id, principal, creation time and state; never a key."""
    from mnemo_tui.cli import output
    from mnemo_tui.engine import rooms

    output.check_format(fmt, allow_ndjson=False)
    keys = rooms.list_keys(_store(ctx, "keys list"))
    if fmt == "json":
        sys.stdout.write(output.dumps(keys) + "\n")
        return
    if not keys:
        sys.stdout.write("No API keys yet. Issue one with `mnemo keys create PRINCIPAL`.\n")
        return
    output.grid(
        sys.stdout,
        ["KEY ID", "PRINCIPAL", "CREATED (UTC)", "STATE"],
        [
            [
                str(k["key_id"]),
                str(k["principal"]),
                str(k["created_at"])[:19].replace("T", " "),
                "revoked" if k["revoked"] else "active",
            ]
            for k in keys
        ],
    )


def keys_revoke(
    ctx: typer.Context,
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id (from `mnemo keys list`).")],
) -> None:
    """Revoke a key: requests with it are refused from now on."""
    from mnemo_tui.cli import output
    from mnemo_tui.engine import rooms

    rooms.revoke_key(_store(ctx, "keys revoke"), key_id)
    output.hint(f"Key {key_id} revoked: requests with it are refused from now on.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("serve", short_help="Serve the embedded store over REST until Ctrl-C.")(serve)
    keys_app.command("create", short_help="Issue a key for a principal (shown once).")(keys_create)
    keys_app.command("list")(keys_list)
    keys_app.command("revoke")(keys_revoke)
    app.add_typer(keys_app, name="keys")
