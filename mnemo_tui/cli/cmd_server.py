"""Provides the serve and keys commands: the embedded store over REST, and the API keys of its principals."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui.cli import output
from mnemo_tui.cli.commands import TableFormat, ctx_of, group
from mnemo_tui.cli.context import Context, needs_extra, store_path
from mnemo_tui.errors import LocalStateError, ValidationError

if TYPE_CHECKING:
    from mnemo_tui.engine.interface import Engine

keys = group("keys", "API keys of `mnemo serve` (embedded store only): create, list, revoke.")
db = group("db", "The database behind `mnemo serve`: copy an embedded store into PostgreSQL; the search's language.")


def _engine(c: Context, command: str) -> Engine:
    from mnemo_tui.backends.local import LocalBackend

    c.embedded_only(command)
    backend = c.backend
    assert isinstance(backend, LocalBackend)
    return backend.engine


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Address to bind; loopback unless told otherwise.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="TCP port (0 picks a free one).")] = 8765,
    allow_reset: Annotated[
        bool,
        typer.Option(
            "--allow-reset", help="Let DELETE /memory/reset wipe a caller's own store (refused with 403 otherwise)."
        ),
    ] = False,
    migrate: Annotated[
        bool,
        typer.Option(
            "--migrate", help="Migrate a PostgreSQL database of an older schema (under a lock; back it up first)."
        ),
    ] = False,
    workers: Annotated[
        int, typer.Option("--workers", metavar="N", help="Database threads (and pooled connections), 1-64.")
    ] = 8,
    database_pooler: Annotated[
        str,
        typer.Option(
            "--database-pooler",
            metavar="transaction|none",
            help="What is between the servers and PostgreSQL: transaction (pgbouncer in transaction mode; the safe "
            "default) or none (sessions are the server's own: statements prepared, fewer round trips).",
        ),
    ] = "transaction",
    # The HTTP edges' bounds (docs/security.md); the defaults are those of server/edges.py.
    max_connections: Annotated[
        int, typer.Option("--max-connections", metavar="N", help="Connections open at once, 1-100000; past it 503.")
    ] = 1000,
    header_timeout: Annotated[
        int,
        typer.Option("--header-timeout", metavar="SECONDS", help="Time to send a request's headers, 1-3600; then 408."),
    ] = 10,
    max_header_bytes: Annotated[
        int,
        typer.Option(
            "--max-header-bytes", metavar="N", help="Request line and headers, 1024-1048576 bytes; past it 431."
        ),
    ] = 16384,
    max_follows: Annotated[
        int,
        typer.Option(
            "--max-follows", metavar="N", help="Push follows open at once, 1-100000 (100 a key at most); past it 503."
        ),
    ] = 500,
    max_subscriptions: Annotated[
        int,
        typer.Option(
            "--max-subscriptions",
            metavar="N",
            help="MCP feed subscriptions held at once, 1-100000 (100 a key at most); past it 503.",
        ),
    ] = 2000,
    subscription_send_timeout: Annotated[
        int,
        typer.Option(
            "--subscription-send-timeout",
            metavar="SECONDS",
            help="Time an MCP subscriber has to take a notification, 1-3600; then its subscriptions end.",
        ),
    ] = 10,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            metavar="text|json",
            help='Log lines on stderr: text, or one JSON object a line (docs/server.md, "Operating it").',
        ),
    ] = "text",
    metrics_on_loopback: Annotated[
        bool,
        typer.Option("--metrics-on-loopback", help="Answer GET /metrics without a key to clients on this machine."),
    ] = False,
    tombstone_retention: Annotated[
        str | None,
        typer.Option(
            "--tombstone-retention",
            metavar="SPAN",
            help="How long removals are kept for `catchup --changes` (30d, 12h...; default 30d, docs/server.md).",
        ),
    ] = None,
) -> int:
    """Serve the embedded store over the Mnemoverse REST dialect (docs/server.md) until Ctrl-C or SIGTERM."""
    c = ctx_of(ctx, creates_store=True)
    c.embedded_only("serve")
    if not 0 <= port <= 65535:
        raise ValidationError(f"--port must be between 0 and 65535, got {port}")
    with needs_extra("server", "mnemo serve"):
        from mnemo_tui.server.edges import Edges
        from mnemo_tui.server.run import serve as run_server
    if not 1 <= workers <= 64:
        raise ValidationError(f"--workers must be between 1 and 64, got {workers}")
    if database_pooler not in ("transaction", "none"):
        raise ValidationError(f"--database-pooler must be transaction or none, got {database_pooler!r}")
    if database_pooler == "none" and not c.settings.database:
        raise ValidationError("--database-pooler is for a PostgreSQL database (--database)")
    pooled = database_pooler == "transaction"
    if log_format not in ("text", "json"):
        raise ValidationError(f"--log-format must be text or json, got {log_format!r}")
    for name, value, low, high in (
        ("--max-connections", max_connections, 1, 100_000),
        ("--header-timeout", header_timeout, 1, 3600),
        ("--max-header-bytes", max_header_bytes, 1024, 1 << 20),
        ("--max-follows", max_follows, 1, 100_000),
        ("--max-subscriptions", max_subscriptions, 1, 100_000),
        ("--subscription-send-timeout", subscription_send_timeout, 1, 3600),
    ):
        if not low <= value <= high:
            raise ValidationError(f"{name} must be between {low} and {high}, got {value}")
    if tombstone_retention is not None:
        from mnemo_tui.engine.tombstones import TombstoneOps, retention_from

        # Every engine of this process (the workers', the PostgreSQL one) keeps removals this long.
        TombstoneOps.tombstone_retention = retention_from(tombstone_retention, field="--tombstone-retention")
    if c.settings.database:
        # Migrated (when --migrate allows) before anything else opens the database.
        from mnemo_tui.backends.local import LocalBackend

        with needs_extra("postgres", "--database"):
            from mnemo_tui.engine.postgres.store import PgStore

        c._backend = LocalBackend(
            PgStore(c.settings.database, migrate_schema=migrate, pooled=pooled), c.settings.principal
        )
    elif migrate:
        raise ValidationError("--migrate is for a PostgreSQL database (--database); a store file migrates by itself")
    if not any(not k.revoked for k in _engine(c, "serve").list_keys()):
        sys.stderr.write(
            "mnemo serve: no active API key yet, so every call but /health will be refused (401); "
            "issue one with `mnemo keys create PRINCIPAL`\n"
        )
    try:
        return run_server(
            None if c.settings.database else Path(store_path(c.settings, creates=True)),
            host,
            port,
            workers=workers,
            allow_reset=allow_reset,
            database=c.settings.database,
            pooled=pooled,
            edges=Edges(max_connections, header_timeout, max_header_bytes),
            max_follows=max_follows,
            max_subscriptions=max_subscriptions,
            subscription_send_seconds=subscription_send_timeout,
            log_format=log_format,
            metrics_on_loopback=metrics_on_loopback,
        )
    except OSError as exc:
        raise ValidationError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None


@keys.command("create", short_help="Issue a key for a principal (shown once).")
def keys_create(
    ctx: typer.Context,
    principal: Annotated[
        str, typer.Argument(metavar="PRINCIPAL", help="Who the key acts as (provenance.principal of its writes).")
    ],
) -> None:
    """Issue a key for a principal; prints the mk_live_ key once (only its hash is kept)."""
    c = ctx_of(ctx, creates_store=True)
    engine = _engine(c, "keys create")
    key_id, key = engine.create_key(principal)
    try:
        sys.stdout.write(key + "\n")
        sys.stdout.flush()
    except OSError as exc:
        # Nobody saw the key (a full disk, a closed pipe): an active key nobody holds must not stay behind.
        engine.revoke_key(key_id)
        raise LocalStateError(
            f"the key could not be written out ({exc.strerror or exc}), so it was revoked at once; try again"
        ) from None


@keys.command("list")
def keys_list(
    ctx: typer.Context,
    fmt: TableFormat = "table",
) -> None:
    """Every key's id, principal, creation time and state; never a key."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    keys = _engine(c, "keys list").list_keys()
    output.listing(
        fmt,
        [k.wire() for k in keys],
        empty="No API keys yet. Issue one with `mnemo keys create PRINCIPAL`.",
        headers=["KEY ID", "PRINCIPAL", "CREATED", "STATE"],
        rows=[
            [
                k.key_id,
                k.principal,
                output.listed_time(k.created_at, c.utc),
                "revoked" if k.revoked else "active",
            ]
            for k in keys
        ],
    )


@keys.command("revoke")
def keys_revoke(
    ctx: typer.Context,
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id (from `mnemo keys list`).")],
) -> None:
    """Revoke a key: requests with it are refused from now on."""
    c = ctx_of(ctx)
    _engine(c, "keys revoke").revoke_key(key_id)
    output.hint(f"Key {key_id} revoked: requests with it are refused from now on.")


@db.command("language", short_help="Show the search's stemming language, or change it (a reindex).")
def db_language(
    ctx: typer.Context,
    language: Annotated[
        str | None,
        typer.Argument(metavar="LANGUAGE", help="A Snowball language (english, german, french, ...); none shows it."),
    ] = None,
) -> None:
    """Show the language search stems words in (a property of the store, English by default), or change it:
    every entry is indexed again, in batches that a stopped run resumes (docs/server.md, "Search words and the
    reindex"). On PostgreSQL, stop the other servers first: they stem new writes in the old language until restarted.
    """
    c = ctx_of(ctx)
    engine = _engine(c, "db language")
    if language is None:
        sys.stdout.write(engine.language + "\n")
        return
    indexed = engine.reindex_search(language.strip().lower())
    output.hint(f"Search now stems words in {engine.language}: {indexed:,} entries indexed again.")


@db.command("copy", short_help="Copy an embedded store into an empty PostgreSQL database.")
def db_copy(
    ctx: typer.Context,
    source: Annotated[str, typer.Option("--from", metavar="STORE", help="The embedded store file to copy.")],
    to: Annotated[
        str | None,
        typer.Option(
            "--to", metavar="URL", help="The PostgreSQL database (default: --database or MNEMO_DATABASE_URL)."
        ),
    ] = None,
    fmt: TableFormat = "table",
) -> None:
    """Copy an embedded store into an empty PostgreSQL database, exactly (ids, times, rooms, members, keys,
    the vault, supersession, feedback and the cursor secret): outstanding cursors continue on the database,
    and this machine's watermarks and checkpoints of the store are carried over, so catchup and --resume do too.
    A database that already holds data is refused; nothing is merged.
    """
    c = ctx_of(ctx)
    from mnemo_tui.dburl import database_identity
    from mnemo_tui.engine.sqlite.store import Store

    fmt = output.check_format(fmt, allow_ndjson=False)
    url = to or c.settings.database
    if not url:
        raise ValidationError("name the database to copy into: --to postgresql://USER@HOST/DB")
    shown = database_identity(url)
    path = Path(source).expanduser()
    if not path.is_file():
        raise ValidationError(f"--from {path}: no such store file")
    store = Store(path, create=False)
    try:
        with needs_extra("postgres", "mnemo db copy"):
            from mnemo_tui.engine.postgres.copy import copy_store

        counts = copy_store(store, url)
    finally:
        store.close()
    carried = c.state.carry(str(path.resolve()), shown)
    if fmt == "json":
        sys.stdout.write(
            output.dumps({"from": str(path), "to": shown, "copied": counts, "state_carried": carried}) + "\n"
        )
        return
    sys.stdout.write(
        f"Copied {path} into {shown}: {counts['atoms']:,} entries, {counts['rooms']} rooms "
        f"({counts['members']} members, {counts['invites']} invites), {counts['api_keys']} API keys, "
        f"{counts['vault']} secrets, {counts['feedback']} feedback rows, and the cursor secret; "
        f"{carried} watermark or checkpoint rows of this machine now apply to the database too.\n"
        f"Check it: mnemo --store {path} recent --all --format ndjson > ids.ndjson; "
        f"mnemo --database URL verify --expect ids.ndjson\n"
    )
