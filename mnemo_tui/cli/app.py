"""Provides the Typer app: thin commands that parse, call the backend, and render (CLI.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mnemo_tui import timefmt
from mnemo_tui.cli import output
from mnemo_tui.cli.context import Context
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import DEFAULT_LIMIT, Entry, RecentQuery, WriteRequest, parse_scope

app = typer.Typer(
    name="mnemo",
    help="Catch up on agent memory: a queryless, newest-first feed per scope, walked with cursors.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
)
rooms_app = typer.Typer(help="Shared rooms: list, create, invite, join.", no_args_is_help=True, rich_markup_mode=None)
vault_app = typer.Typer(help="Secrets: aliases and context only, never a value.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(rooms_app, name="rooms")
app.add_typer(vault_app, name="vault")

ScopeOpt = Annotated[
    str | None, typer.Option("--scope", "-s", help="Omit for your own store; a domain; or xroom:<room_id>.")
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json or ndjson.")]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Inclusive low bound (ISO-8601, date, 15m, 2h, today...).")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Inclusive high bound (same grammar as --since).")]


def ctx_of(ctx: typer.Context) -> Context:
    obj = ctx.find_root().obj
    assert isinstance(obj, Context)
    return obj


@app.callback()
def root(
    ctx: typer.Context,
    profile: Annotated[str | None, typer.Option("--profile", help="Profile of config.toml to use.")] = None,
    store: Annotated[str | None, typer.Option("--store", help="Embedded store file (selects the embedded engine).")] = None,
    endpoint: Annotated[str | None, typer.Option("--endpoint", help="REST base URL (selects the remote backend).")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    """Catch up on agent memory."""
    from mnemo_tui.state.config import resolve, with_debug

    settings = with_debug(resolve(profile=profile, store=store, endpoint=endpoint), debug)
    context = Context(settings)
    ctx.obj = context
    ctx.call_on_close(context.close)


def _times(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    low = timefmt.parse_time(since, field="--since") if since is not None else None
    high = timefmt.parse_time(until, field="--until", end_of_day=True) if until is not None else None
    if low is not None and high is not None and high < low:
        raise ValidationError(f"--until {until!r} is before --since {since!r}")
    return low, high


def _scope(scope: str | None) -> str | None:
    return parse_scope(scope)


# -- write --------------------------------------------------------------------------------


@app.command()
def write(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The entry's content, or - to read it from stdin.")],
    scope: Annotated[str | None, typer.Option("--scope", "-s", help="Domain (default general) or xroom:<room_id>.")] = None,
    concept: Annotated[list[str] | None, typer.Option("--concept", "-c", help="A concept (tag); repeatable.")] = None,
    supersedes: Annotated[list[str] | None, typer.Option("--supersedes", help="An atom id this entry replaces; repeatable.")] = None,
    ref: Annotated[str | None, typer.Option("--ref", help="External reference: a repeated write returns the first atom.")] = None,
) -> None:
    """Store an entry; prints its atom_id."""
    c = ctx_of(ctx)
    content = sys.stdin.read() if text == "-" else text
    if text == "-" and content.endswith("\n"):
        content = content[:-1]
    domain = _scope(scope) or "general"
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


# -- recent -------------------------------------------------------------------------------


@app.command()
def recent(
    ctx: typer.Context,
    scope: ScopeOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    exclude_author: Annotated[str | None, typer.Option("--exclude-author", help="Drop entries by this principal.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Page size, 1-100.")] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue from a previous page's cursor.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Follow cursors to the end of the feed, streaming.")] = False,
    include_history: Annotated[bool, typer.Option("--include-history", help="Include superseded revisions.")] = False,
    fmt: FormatOpt = "table",
) -> None:
    """One page of the feed, newest first (--all: every page)."""
    c = ctx_of(ctx)
    output.check_format(fmt)
    low, high = _times(since, until)
    query = RecentQuery(
        scope=_scope(scope),
        since=low,
        until=high,
        exclude_author=exclude_author,
        limit=limit,
        cursor=cursor,
        include_history=include_history,
    ).validated()
    backend = c.backend
    out = sys.stdout
    if all_:
        _recent_all(c, query, fmt)
        return
    page = backend.recent(query)
    report = None
    if not page.items:
        from mnemo_tui import reports

        report = reports.for_recent(backend, query)
    if fmt == "ndjson":
        output.ndjson(out, (e.wire for e in page.items))
        if page.next_cursor:
            output.hint(f"next_cursor: {page.next_cursor}")
        if report is not None:
            sys.stderr.write(report.text + "\n")
    elif fmt == "json":
        out.write(
            '{"items":['
            + ",".join(e.wire for e in page.items)
            + f'],"next_cursor":{output.dumps(page.next_cursor)},"scope":{output.dumps(query.scope)},'
            + f'"empty_report":{output.dumps(report.wire() if report else None)}}}\n'
        )
    else:
        table = output.TableWriter(out)
        if report is not None:
            table.report(report)
        else:
            table.rows(page.items)
        if page.next_cursor:
            output.hint(_continue_hint(query, page.next_cursor))


def _continue_hint(query: RecentQuery, next_cursor: str) -> str:
    args = ["mnemo recent"]
    if query.scope:
        args.append(f"--scope {query.scope}")
    if query.since is not None:
        args.append(f"--since {timefmt.to_iso(query.since)}")
    if query.until is not None:
        args.append(f"--until {timefmt.to_iso(query.until)}")
    if query.exclude_author:
        args.append(f"--exclude-author {query.exclude_author}")
    if query.include_history:
        args.append("--include-history")
    if query.limit != DEFAULT_LIMIT:
        args.append(f"--limit {query.limit}")
    args.append(f"--cursor {next_cursor}")
    return "More entries remain. Continue with:\n  " + " ".join(args) + "\n(or add --all to read to the end)"


def _recent_all(c: Context, query: RecentQuery, fmt: str) -> None:
    out = sys.stdout
    backend = c.backend
    count = 0
    if fmt == "table":
        from mnemo_tui.backends import walk_pages

        table = output.TableWriter(out)
        for page in walk_pages(backend, query):
            if page.items:
                table.rows(page.items)
                count += len(page.items)
        if count == 0:
            from mnemo_tui import reports

            table.report(reports.for_recent(backend, query))
        return
    if fmt == "json":
        out.write('{"items":[')
    for chunk in backend.stream_wire(query):
        if fmt == "json":
            out.write(("," if count else "") + ",".join(chunk))
        else:
            out.write("\n".join(chunk) + "\n")
        count += len(chunk)
    report = None
    if count == 0:
        from mnemo_tui import reports

        report = reports.for_recent(backend, query)
    if fmt == "json":
        out.write(
            f'],"next_cursor":null,"scope":{output.dumps(query.scope)},'
            f'"empty_report":{output.dumps(report.wire() if report else None)}}}\n'
        )
    elif report is not None:
        sys.stderr.write(report.text + "\n")


# -- catchup ------------------------------------------------------------------------------


@app.command()
def catchup(
    ctx: typer.Context,
    scope: ScopeOpt = None,
    consumer: Annotated[str | None, typer.Option("--consumer", help="Reader name; one watermark per scope each.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Low bound of a first pass (no watermark yet).")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Page size of each request, 1-100.")] = 100,
    overlap: Annotated[str | None, typer.Option("--overlap", help="Re-read this span below the watermark (default 0 embedded, 2s endpoint).")] = None,
    no_commit: Annotated[bool, typer.Option("--no-commit", help="Touch neither the watermark nor the checkpoint.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted walk from its checkpoint.")] = False,
    exit_code: Annotated[bool, typer.Option("--exit-code", help="Exit 1 when nothing is new.")] = False,
    fmt: FormatOpt = "table",
) -> int:
    """Print only what is new to this consumer, then commit the watermark."""
    from mnemo_tui.catchup import CatchUp

    c = ctx_of(ctx)
    output.check_format(fmt)
    from mnemo_tui.model import check_limit

    check_limit(limit)
    scope_value = _scope(scope)
    consumer_name = consumer or c.settings.consumer
    if not consumer_name.strip() or len(consumer_name) > 200:
        raise ValidationError("--consumer must be 1 to 200 characters")
    low = timefmt.parse_time(since, field="--since") if since is not None else None
    backend = c.backend
    if overlap is None:
        overlap_us = 2_000_000 if backend.kind == "remote" else 0
    else:
        overlap_us = timefmt.parse_overlap(overlap)
    walk = CatchUp(
        backend, c.state, consumer=consumer_name, scope=scope_value, limit=limit, overlap=overlap_us, since=low
    )
    out = sys.stdout
    table = output.TableWriter(out) if fmt == "table" else None
    progress = sys.stderr.isatty()
    started = [False]
    counted = [0]

    def emit(entries: list[Entry]) -> None:
        if fmt == "ndjson":
            output.ndjson(out, (e.wire for e in entries))
        elif fmt == "json":
            out.write(("," if started[0] else "") + ",".join(e.wire for e in entries))
        else:
            assert table is not None
            table.rows(entries)
        started[0] = True
        out.flush()
        counted[0] += len(entries)
        if progress:
            sys.stderr.write(f"\r{counted[0]} new so far…")
            sys.stderr.flush()

    if fmt == "json":
        out.write(f'{{"scope":{output.dumps(scope_value)},"consumer":{output.dumps(consumer_name)},"items":[')
    if resume and not walk.has_checkpoint():
        output.hint("nothing to resume: starting a new pass from the watermark")
    elif not resume and not no_commit and walk.has_checkpoint():
        output.hint("an interrupted walk was found; re-reading from the watermark (use --resume to continue it)")
    try:
        result = walk.run(emit, commit=not no_commit, resume=resume)
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        sys.stderr.write("mnemo: output closed mid-walk; the watermark was not moved (run again, or --resume)\n")
        return 130
    if progress and counted[0]:
        sys.stderr.write("\r" + " " * 30 + "\r")
    report = None
    if result.delivered == 0:
        from mnemo_tui import reports

        report = reports.for_catchup(backend, scope_value, result.before, low)
    from mnemo_tui.state.statedb import watermark_wire

    if fmt == "json":
        out.write(
            f'],"watermark":{output.dumps({"before": watermark_wire(result.before), "after": watermark_wire(result.after)})},'
            f'"pages":{result.pages},"repeats_skipped":{result.repeats_skipped},'
            f'"resumed":{output.dumps(result.resumed)},"empty_report":{output.dumps(report.wire() if report else None)}}}\n'
        )
    elif fmt == "ndjson":
        if report is not None:
            sys.stderr.write(report.text + "\n")
    else:
        assert table is not None
        if report is not None:
            table.report(report)
        else:
            moved = "watermark not moved (--no-commit)" if no_commit else "watermark moved"
            if result.after is not None and result.after.created_at is not None and not no_commit:
                moved = f"watermark now {timefmt.to_iso(result.after.created_at)}"
            output.hint(
                f"{result.delivered} new for {consumer_name!r} in {result.pages} page(s); {moved}"
                + (f"; {result.repeats_skipped} repeat(s) skipped" if result.repeats_skipped else "")
            )
    if exit_code and result.delivered == 0:
        return 1
    return 0


# -- search -------------------------------------------------------------------------------


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to search for (required: without a query, use `mnemo recent`).")],
    scope: ScopeOpt = None,
    order_by: Annotated[str, typer.Option("--order-by", help="relevance or recency.")] = "relevance",
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many results, 1-500.")] = 10,
    include_history: Annotated[bool, typer.Option("--include-history", help="Include superseded revisions.")] = False,
    fmt: FormatOpt = "table",
) -> None:
    """Search entries (needs a query; `mnemo recent` is the read without one)."""
    from mnemo_tui.model import SearchQuery

    c = ctx_of(ctx)
    output.check_format(fmt)
    if not query.strip():
        raise ValidationError("search needs a query; to list what happened lately, use `mnemo recent`")
    if order_by not in ("relevance", "recency"):
        raise ValidationError(f"--order-by must be relevance or recency, got {order_by!r}")
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
    elif fmt == "json":
        out.write(
            '{"items":[' + ",".join(wires) + f'],"query":{output.dumps(query)},"scope":{output.dumps(scope_value)}}}\n'
        )
    else:
        if not hits:
            out.write(f"No entry in {_scope_words(scope_value)} matches {query!r}.\n")
            return
        output.TableWriter(out).rows([h.entry for h in hits])


def _scope_words(scope: str | None) -> str:
    from mnemo_tui.model import describe_scope

    return describe_scope(scope)


# -- rooms --------------------------------------------------------------------------------


@rooms_app.command("list")
def rooms_list(ctx: typer.Context, fmt: FormatOpt = "table") -> None:
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
    )


@rooms_app.command("create")
def rooms_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The room's name (unique among your rooms).")],
    description: Annotated[str | None, typer.Option("--description", help="What the room is for.")] = None,
    fmt: FormatOpt = "table",
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
    room: Annotated[str, typer.Argument(help="Room address, id or name.")],
    read_only: Annotated[bool, typer.Option("--read-only", help="Invitees may read but not write.")] = False,
    max_uses: Annotated[int, typer.Option("--max-uses", help="How many joins the code allows, 1-1000.")] = 1,
    expires_days: Annotated[int, typer.Option("--expires-days", help="Days the code stays valid, 1-90.")] = 7,
    fmt: FormatOpt = "table",
) -> None:
    """Create an invite code (owner only); prints the mnvr_ code once."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    invite = c.backend.invite(room, scope="read" if read_only else "read_write", expires_days=expires_days, max_uses=max_uses)
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
        "join_url": None,
        "share_message": f"Join with: mnemo rooms join {invite.code}",
    }


@rooms_app.command("join")
def rooms_join(
    ctx: typer.Context,
    code: Annotated[str, typer.Argument(help="The mnvr_ invite code.")],
    fmt: FormatOpt = "table",
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
def vault_list(ctx: typer.Context, fmt: FormatOpt = "table") -> None:
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
        ["ALIAS", "CONTEXT", "CREATED (UTC)"],
        [[s.alias, s.context, timefmt.to_iso(s.created_at)[:19].replace("T", " ")] for s in secrets],
    )


@vault_app.command("add")
def vault_add(
    ctx: typer.Context,
    alias: Annotated[str, typer.Argument(help="Name of the secret: letters, digits, . _ -")],
    context: Annotated[str, typer.Option("--context", help="What the secret is for (shown in listings).")],
) -> None:
    """Store a secret: the value comes from stdin or a hidden prompt, never an argument."""
    import base64

    c = ctx_of(ctx)
    from mnemo_tui.model import ALIAS_SHAPE

    if not ALIAS_SHAPE.match(alias):
        raise ValidationError(f"alias {alias!r} must match ^[A-Za-z0-9._-]+$")
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
