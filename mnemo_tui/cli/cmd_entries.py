"""Provides the write and search commands."""

from __future__ import annotations

import sys

from mnemo_tui import reports, verbs
from mnemo_tui.cli import output
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.feed import check_limit_flag, parse_times, resolved_scope, room_name_hint
from mnemo_tui.cli.options import (
    Args,
    argument,
    entry_format_opt,
    given,
    include_history_opt,
    limit_opt,
    scope_opt,
    since_opt,
    text,
    texts,
    until_opt,
)
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import (
    MAX_CONCEPTS,
    MAX_EXTERNAL_REF,
    MAX_SUPERSEDES,
    EmptyReport,
    SearchQuery,
    WriteRequest,
    parse_scope,
    room_of,
)
from mnemo_tui.text import line as safe


class WriteArgs(Args):
    """Store an entry; prints its atom_id."""

    creates_store = True

    content = argument(
        "TEXT", "The entry's content; - (or nothing, in a pipe) reads stdin; nothing on a terminal opens $EDITOR."
    )
    scope = scope_opt("Domain (default general) or xroom:<room_id>.")
    concept = texts("--concept", "-c", metavar="CONCEPT", help="A concept (tag); repeatable.")
    supersedes = texts(
        "--supersedes", metavar="ATOM_ID", help="An atom id (or unique prefix) this entry replaces; repeatable."
    )
    ref = text("--ref", metavar="REF", help="External reference: a repeated write returns the first atom.")


def _from_editor(domain: str) -> str:
    """The entry's text written in the person's editor (`mnemo write` alone on a terminal, as `git commit`)."""
    from mnemo_tui.files import edit_text, editor_command

    written = edit_text(
        "",
        [
            f"Write the entry for {domain} above the scissors line; save and quit to store it.",
            "An empty text stores nothing.",
        ],
    )
    if written is None:
        raise ValidationError(f"the editor ({safe(editor_command())}) failed or was not found: nothing stored")
    if not written.strip():
        raise ValidationError("the entry's text is empty: nothing stored")
    return written


def write(c: Context, args: WriteArgs) -> None:
    if args.content is None and sys.stdin.isatty():
        content = _from_editor(parse_scope(args.scope) or "general")
    elif args.content is None or args.content == "-":
        content = sys.stdin.read()
        if content.endswith("\n"):
            content = content[:-1]
    else:
        content = args.content
    if not content.strip():
        raise ValidationError("the entry's content is empty")
    domain = parse_scope(args.scope) or "general"
    if args.scope is not None and room_of(domain) is None and domain not in c.backend.domains():
        refusal = verbs.write_refusal(domain, c.backend.rooms(), own_domains=[])
        if refusal is not None:
            raise ValidationError(refusal)
    concepts = tuple(args.concept or ())
    supersedes = tuple(args.supersedes or ())
    if len(concepts) > MAX_CONCEPTS:
        raise ValidationError(f"--concept repeats at most {MAX_CONCEPTS} times, got {len(concepts)}")
    if len(supersedes) > MAX_SUPERSEDES:
        raise ValidationError(f"--supersedes repeats at most {MAX_SUPERSEDES} times, got {len(supersedes)}")
    if args.ref is not None and not 1 <= len(args.ref) <= MAX_EXTERNAL_REF:
        raise ValidationError(f"--ref must be 1 to {MAX_EXTERNAL_REF} characters, got {len(args.ref)}")
    if supersedes:
        from mnemo_tui.cli.cmd_atoms import resolve_id

        supersedes = tuple(resolve_id(c.backend, value) for value in supersedes)
    result = c.backend.write(
        WriteRequest(
            content=content,
            domain=domain,
            concepts=concepts,
            external_ref=args.ref,
            supersedes=supersedes,
            agent=c.settings.agent,
            agent_name=c.settings.agent,
            client_env="cli",
        )
    )
    sys.stdout.write(safe(result.atom_id) + "\n")  # an endpoint answered it
    if not result.created:
        # stdout stays what CLI.md fixes (the first atom's id); the person learns nothing new was stored.
        output.hint(f"note: nothing written: --ref '{safe(args.ref or '')}' was already used by this entry")


class SearchArgs(Args):
    """Search entries (needs a query; `mnemo recent` is the read without one)."""

    summary = "Search entries (needs a query; `mnemo recent` lists without)."
    query = argument("QUERY", "What to search for (required: without a query, use `mnemo recent`).")
    scope = scope_opt()
    order_by = given("--order-by", metavar="ORDER", help="relevance or recency.", default="relevance")
    since = since_opt()
    until = until_opt()
    limit = limit_opt(10, "How many results, 1-500.")
    include_history = include_history_opt()
    fmt = entry_format_opt()


def search(c: Context, args: SearchArgs) -> None:

    output.check_format(args.fmt)
    query = args.query
    if query is None or not query.strip():
        raise ValidationError("search needs a query; to list what happened lately, use `mnemo recent`")
    if args.order_by not in ("relevance", "recency"):
        raise ValidationError(f"--order-by must be relevance or recency, got {args.order_by!r}")
    check_limit_flag(args.limit, 500)
    low, high = parse_times(args.since, args.until, utc=c.utc)
    scope_value = resolved_scope(c, parse_scope(args.scope))
    hits = c.backend.search(
        SearchQuery(
            query=query,
            scope=scope_value,
            order_by="relevance" if args.order_by == "relevance" else "recency",
            since=low,
            until=high,
            include_history=args.include_history,
            top_k=args.limit,
        )
    )
    wires = [h.entry.wire[:-1] + f',"relevance":{h.relevance}}}' for h in hits]
    out = sys.stdout
    if args.fmt == "ndjson":
        output.ndjson(out, wires)
        if not hits:
            out.flush()
            empty = _search_empty(c, query, scope_value, args.since, args.until)
            output.hint(empty.shown)
            room_name_hint(c.backend, empty)
    elif args.fmt == "json":
        out.write(
            '{"items":[' + ",".join(wires) + f'],"query":{output.dumps(query)},"scope":{output.dumps(scope_value)}}}\n'
        )
    else:
        if not hits:
            empty = _search_empty(c, query, scope_value, args.since, args.until)
            out.write(empty.shown + "\n")
            room_name_hint(c.backend, empty)
            return
        with output.paged(args.fmt, no_pager=c.no_pager, configured=c.settings.pager):
            output.TableWriter(sys.stdout, scope=scope_value, utc=c.utc).rows([h.entry for h in hits])


def _search_empty(c: Context, query: str, scope: str | None, since: str | None, until: str | None) -> EmptyReport:
    """What an empty search covered (the one rule, `reports.for_search`, which the TUI's search shows too)."""
    return reports.for_search(c.backend, query, scope, since=since, until=until)
