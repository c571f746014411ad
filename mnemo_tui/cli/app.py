"""Provides the Typer app: thin commands that parse, call the backend, and render (CLI.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mnemo_tui import timefmt
from mnemo_tui.cli import output
from mnemo_tui.cli.context import Context
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import DEFAULT_LIMIT, EmptyReport, WriteRequest, parse_scope

app = typer.Typer(
    name="mnemo",
    help="Catch up on agent memory: a queryless, newest-first feed per scope, walked with cursors.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
)
rooms_app = typer.Typer(help="Shared rooms: list, create, invite, join.", no_args_is_help=True, rich_markup_mode=None)
vault_app = typer.Typer(
    help="Secrets: aliases and context only, never a value.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(rooms_app, name="rooms")
app.add_typer(vault_app, name="vault")

ScopeOpt = Annotated[
    str | None,
    typer.Option("--scope", "-s", metavar="SCOPE", help="Omit for your own store; a domain; or xroom:<room_id>."),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", metavar="FORMAT", help="table, json or ndjson.")]
# Commands whose output is not a list of entries have no ndjson (CLI.md): their help says so.
TableJsonOpt = Annotated[str, typer.Option("--format", "-f", metavar="FORMAT", help="table or json.")]
SinceOpt = Annotated[
    str | None,
    typer.Option("--since", metavar="TIME", help="Inclusive low bound (ISO-8601, date, 15m, 2h, today...)."),
]
UntilOpt = Annotated[
    str | None, typer.Option("--until", metavar="TIME", help="Inclusive high bound (same grammar as --since).")
]


def ctx_of(ctx: typer.Context) -> Context:
    """The invocation's `Context`, resolved from the root options on first use.

    Resolving lazily keeps `mnemo COMMAND --help` working when config.toml is broken.
    """
    root_ctx = ctx.find_root()
    obj = root_ctx.obj
    if isinstance(obj, _RootOptions):
        from mnemo_tui.state.config import resolve, with_debug

        settings = with_debug(resolve(profile=obj.profile, store=obj.store, endpoint=obj.endpoint), obj.debug)
        obj = Context(settings)
        root_ctx.obj = obj
        root_ctx.call_on_close(obj.close)
    assert isinstance(obj, Context)
    return obj


class _RootOptions:
    """The root options, kept until a command needs the settings they select."""

    def __init__(self, profile: str | None, store: str | None, endpoint: str | None, debug: bool) -> None:
        self.profile, self.store, self.endpoint, self.debug = profile, store, endpoint, debug


@app.callback()
def root(
    ctx: typer.Context,
    profile: Annotated[
        str | None, typer.Option("--profile", metavar="NAME", help="Profile of config.toml to use.")
    ] = None,
    store: Annotated[
        str | None, typer.Option("--store", metavar="PATH", help="Embedded store file (selects the embedded engine).")
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", metavar="URL", help="REST base URL (selects the remote backend).")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    """Catch up on agent memory."""
    ctx.obj = _RootOptions(profile, store, endpoint, debug)


def _times(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    from mnemo_tui.cli.feed import parse_times

    return parse_times(since, until)


def _scope(scope: str | None) -> str | None:
    return parse_scope(scope)


# -- write --------------------------------------------------------------------------------


@app.command()
def write(
    ctx: typer.Context,
    text: Annotated[
        str | None,
        typer.Argument(metavar="TEXT", help="The entry's content, or - (or nothing, in a pipe) to read it from stdin."),
    ] = None,
    scope: Annotated[
        str | None, typer.Option("--scope", "-s", metavar="SCOPE", help="Domain (default general) or xroom:<room_id>.")
    ] = None,
    concept: Annotated[
        list[str] | None, typer.Option("--concept", "-c", metavar="CONCEPT", help="A concept (tag); repeatable.")
    ] = None,
    supersedes: Annotated[
        list[str] | None,
        typer.Option("--supersedes", metavar="ATOM_ID", help="An atom id this entry replaces; repeatable."),
    ] = None,
    ref: Annotated[
        str | None,
        typer.Option("--ref", metavar="REF", help="External reference: a repeated write returns the first atom."),
    ] = None,
) -> None:
    """Store an entry; prints its atom_id."""
    c = ctx_of(ctx)
    if text is None and sys.stdin.isatty():
        raise ValidationError("write needs the entry's text: `mnemo write TEXT`, or `-` to read it from stdin")
    if text is None or text == "-":
        content = sys.stdin.read()
        if content.endswith("\n"):
            content = content[:-1]
    else:
        content = text
    if not content.strip():
        raise ValidationError("the entry's content is empty")
    domain = _scope(scope) or "general"
    if len(concept or ()) > 256:
        raise ValidationError(f"--concept repeats at most 256 times, got {len(concept or ())}")
    if len(supersedes or ()) > 32:
        raise ValidationError(f"--supersedes repeats at most 32 times, got {len(supersedes or ())}")
    if ref is not None and not 1 <= len(ref) <= 255:
        raise ValidationError(f"--ref must be 1 to 255 characters, got {len(ref)}")
    result = c.backend.write(
        WriteRequest(
            content=content,
            domain=domain,
            concepts=tuple(concept or ()),
            external_ref=ref,
            supersedes=tuple(supersedes or ()),
            agent=c.settings.agent,
            agent_name=c.settings.agent,
            client_env="cli",
        )
    )
    sys.stdout.write(result.atom_id + "\n")


# -- recent and catchup (bodies in feed.py, shared with the start-up fast path) -----------


@app.command()
def recent(
    ctx: typer.Context,
    scope: ScopeOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    exclude_author: Annotated[
        str | None, typer.Option("--exclude-author", metavar="PRINCIPAL", help="Drop entries by this principal.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="Page size, 1-100.")] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        typer.Option(
            "--cursor",
            metavar="CURSOR",
            help="Continue from a previous page's cursor (with the same scope and filters).",
        ),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Follow cursors to the end of the feed, streaming.")] = False,
    include_history: Annotated[bool, typer.Option("--include-history", help="Include superseded revisions.")] = False,
    fmt: FormatOpt = "table",
) -> int:
    """One page of the feed, newest first (--all: every page)."""
    from mnemo_tui.cli import feed

    args = feed.RecentArgs(scope, since, until, exclude_author, limit, cursor, all_, include_history, fmt)
    return feed.recent(ctx_of(ctx), args)


@app.command(short_help="What is new to this consumer; then commits its watermark.")
def catchup(
    ctx: typer.Context,
    scope: ScopeOpt = None,
    consumer: Annotated[
        str | None, typer.Option("--consumer", "-c", metavar="NAME", help="Reader name; one watermark per scope each.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", metavar="TIME", help="Read nothing older than this (with a watermark: the later of the two)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="Page size of each request, 1-100.")] = 100,
    overlap: Annotated[
        str | None,
        typer.Option(
            "--overlap", metavar="SPAN", help="Re-read this span below the watermark (default 0 embedded, 2s endpoint)."
        ),
    ] = None,
    no_commit: Annotated[
        bool, typer.Option("--no-commit", help="Touch neither the watermark nor the checkpoint.")
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted walk from its checkpoint.")] = False,
    exit_code: Annotated[bool, typer.Option("--exit-code", help="Exit 1 when nothing is new.")] = False,
    fmt: FormatOpt = "table",
) -> int:
    """Print only what is new to this consumer, then commit the watermark."""
    from mnemo_tui.cli import feed

    args = feed.CatchupArgs(scope, consumer, since, limit, overlap, no_commit, resume, exit_code, fmt)
    return feed.catchup(ctx_of(ctx), args)


# -- search -------------------------------------------------------------------------------


@app.command(short_help="Search entries (needs a query; `mnemo recent` lists without).")
def search(
    ctx: typer.Context,
    query: Annotated[
        str | None,
        typer.Argument(metavar="QUERY", help="What to search for (required: without a query, use `mnemo recent`)."),
    ] = None,
    scope: ScopeOpt = None,
    order_by: Annotated[str, typer.Option("--order-by", metavar="ORDER", help="relevance or recency.")] = "relevance",
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="How many results, 1-500.")] = 10,
    include_history: Annotated[bool, typer.Option("--include-history", help="Include superseded revisions.")] = False,
    fmt: FormatOpt = "table",
) -> None:
    """Search entries (needs a query; `mnemo recent` is the read without one)."""
    from mnemo_tui.cli.feed import room_name_hint
    from mnemo_tui.model import SearchQuery

    c = ctx_of(ctx)
    output.check_format(fmt)
    if query is None or not query.strip():
        raise ValidationError("search needs a query; to list what happened lately, use `mnemo recent`")
    if order_by not in ("relevance", "recency"):
        raise ValidationError(f"--order-by must be relevance or recency, got {order_by!r}")
    from mnemo_tui.cli.feed import check_limit_flag

    check_limit_flag(limit, 500)
    low, high = _times(since, until)
    scope_value = _scope(scope)
    hits = c.backend.search(
        SearchQuery(
            query=query,
            scope=scope_value,
            order_by="relevance" if order_by == "relevance" else "recency",
            since=low,
            until=high,
            include_history=include_history,
            top_k=limit,
        )
    )
    wires = [h.entry.wire[:-1] + f',"relevance":{h.relevance}}}' for h in hits]
    out = sys.stdout
    if fmt == "ndjson":
        output.ndjson(out, wires)
        if not hits:
            out.flush()
            empty = _search_empty(c, query, scope_value, since, until)
            output.hint(empty.text)
            room_name_hint(c.backend, empty)
    elif fmt == "json":
        out.write(
            '{"items":[' + ",".join(wires) + f'],"query":{output.dumps(query)},"scope":{output.dumps(scope_value)}}}\n'
        )
    else:
        if not hits:
            empty = _search_empty(c, query, scope_value, since, until)
            out.write(empty.text + "\n")
            room_name_hint(c.backend, empty)
            return
        output.TableWriter(out, scope=scope_value).rows([h.entry for h in hits])


def _search_empty(c: Context, query: str, scope: str | None, since: str | None, until: str | None) -> EmptyReport:
    """What an empty search covered: the scope and query, and (unscoped) the rooms it did not search."""
    from mnemo_tui import reports
    from mnemo_tui.model import RecentQuery

    filters = f"the query {query!r}" + "".join(
        f" {flag} {value}" for flag, value in (("since", since), ("until", until)) if value is not None
    )
    if c.backend.recent(RecentQuery(scope=scope, limit=1, include_history=True)).items:
        return reports.build(c.backend, "no_match", scope, filters=filters)
    return reports.build(c.backend, "empty_scope", scope)


# -- rooms --------------------------------------------------------------------------------


@rooms_app.command("list")
def rooms_list(ctx: typer.Context, fmt: TableJsonOpt = "table") -> None:
    """The rooms you belong to."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    rooms = c.backend.rooms()
    if fmt == "json":
        sys.stdout.write(output.dumps([r.wire() for r in rooms]) + "\n")
        return
    if not rooms:
        sys.stdout.write("You belong to no rooms yet. Create one with `mnemo rooms create NAME`.\n")
        return
    output.grid(
        sys.stdout,
        ["NAME", "ADDRESS", "ROLE", "ACCESS"],
        [[r.name, r.address, r.role, r.scope + (" (archived)" if r.archived else "")] for r in rooms],
        flex=0,
    )


@rooms_app.command("create")
def rooms_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The room's name (unique among your rooms).")],
    description: Annotated[
        str | None, typer.Option("--description", metavar="TEXT", help="What the room is for.")
    ] = None,
    fmt: TableJsonOpt = "table",
) -> None:
    """Create a room; prints its xroom: address."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    room = c.backend.create_room(name, description)
    if fmt == "json":
        sys.stdout.write(
            output.dumps(
                {
                    "room_id": room.room_id,
                    "address": room.address,
                    "name": room.name,
                    "next_steps": f"Invite members with `mnemo rooms invite {room.address}`.",
                }
            )
            + "\n"
        )
    else:
        sys.stdout.write(room.address + "\n")


@rooms_app.command("invite")
def rooms_invite(
    ctx: typer.Context,
    room: Annotated[str, typer.Argument(metavar="ROOM", help="Room address, id or name.")],
    read_only: Annotated[bool, typer.Option("--read-only", help="Invitees may read but not write.")] = False,
    max_uses: Annotated[
        int, typer.Option("--max-uses", metavar="N", help="How many joins the code allows, 1-1000.")
    ] = 1,
    expires_days: Annotated[
        int, typer.Option("--expires-days", metavar="N", help="Days the code stays valid, 1-90.")
    ] = 7,
    fmt: TableJsonOpt = "table",
) -> None:
    """Create an invite code (owner only); prints the mnvr_ code once."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    if room.startswith("xroom:"):
        _scope(room)  # a malformed address is a usage error (2), as for every scope
    if not 1 <= max_uses <= 1000:
        raise ValidationError(f"--max-uses must be between 1 and 1000, got {max_uses}")
    if not 1 <= expires_days <= 90:
        raise ValidationError(f"--expires-days must be between 1 and 90, got {expires_days}")
    invite = c.backend.invite(
        room, scope="read" if read_only else "read_write", expires_days=expires_days, max_uses=max_uses
    )
    if fmt == "json":
        sys.stdout.write(output.dumps(invite_wire(invite)) + "\n")
    else:
        sys.stdout.write(invite.code + "\n")


def invite_wire(invite: object) -> dict[str, object]:
    from mnemo_tui.model import Invite

    assert isinstance(invite, Invite)
    return {
        "code": invite.code,
        "room_address": invite.room_address,
        "invite_id": invite.invite_id,
        "scope": invite.scope,
        "expires_at": timefmt.to_iso(invite.expires_at),
        "join_url": "",  # no landing page of our own; the schema wants a string (as `mnemo serve` answers)
        "share_message": f"Join the room {invite.room_address} with: mnemo rooms join {invite.code}",
    }


@rooms_app.command("join")
def rooms_join(
    ctx: typer.Context,
    code: Annotated[str, typer.Argument(metavar="CODE", help="The mnvr_ invite code.")],
    fmt: TableJsonOpt = "table",
) -> None:
    """Join a room by invite code; prints its address."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    joined = c.backend.join(code.strip())
    if fmt == "json":
        sys.stdout.write(
            output.dumps(
                {
                    "room_id": joined.room_id,
                    "address": joined.address,
                    "name": joined.name,
                    "scope": joined.scope,
                    "already_member": joined.already_member,
                    "next_steps": f"Read it with `mnemo recent --scope {joined.address}`.",
                }
            )
            + "\n"
        )
    else:
        sys.stdout.write(joined.address + "\n")


# -- vault --------------------------------------------------------------------------------


@vault_app.command("list")
def vault_list(ctx: typer.Context, fmt: TableJsonOpt = "table") -> None:
    """Your secrets' aliases and context (never a value)."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    secrets = c.backend.vault_list()
    if fmt == "json":
        sys.stdout.write(
            output.dumps(
                {
                    "secrets": [
                        {
                            "alias": s.alias,
                            "context": s.context,
                            "created_at": timefmt.to_iso(s.created_at),
                            "concepts": list(s.concepts),
                        }
                        for s in secrets
                    ]
                }
            )
            + "\n"
        )
        return
    if not secrets:
        sys.stdout.write("Your vault is empty. Add a secret with `mnemo vault add ALIAS --context TEXT`.\n")
        return
    output.grid(
        sys.stdout,
        ["ALIAS", "CREATED (UTC)", "CONTEXT"],
        [[s.alias, timefmt.to_iso(s.created_at)[:19].replace("T", " "), s.context] for s in secrets],
        flex=2,
    )


@vault_app.command("add", short_help="Store a secret (value from stdin or a hidden prompt).")
def vault_add(
    ctx: typer.Context,
    alias: Annotated[str, typer.Argument(metavar="ALIAS", help="Name of the secret: letters, digits, . _ -")],
    context: Annotated[
        str, typer.Option("--context", metavar="TEXT", help="What the secret is for (shown in listings).")
    ],
) -> None:
    """Store a secret: the value comes from stdin or a hidden prompt, never an argument."""
    import base64

    c = ctx_of(ctx)
    from mnemo_tui.model import ALIAS_SHAPE

    if not ALIAS_SHAPE.match(alias):
        raise ValidationError(f"alias {alias!r} must match ^[A-Za-z0-9._-]+$")
    if len(context) > 10_000:
        raise ValidationError(f"--context is at most 10000 characters, got {len(context)}")
    if sys.stdin.isatty():
        import getpass

        value = getpass.getpass(f"Value of {alias} (hidden): ")
    else:
        value = sys.stdin.read()
        if value.endswith("\n"):
            value = value[:-1]
    if not value:
        raise ValidationError("the secret's value is empty")
    sealed = base64.b64encode(value.encode()).decode()
    c.backend.vault_add(alias, context, sealed)
    sys.stdout.write(alias + "\n")


# -- commands of other modules (each registers its own; heavy imports stay inside commands) --

from mnemo_tui.cli import cmd_proof, cmd_server, cmd_state, cmd_tui  # noqa: E402

for _module in (cmd_state, cmd_server, cmd_tui, cmd_proof):
    _module.register(app)
