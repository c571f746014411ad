"""Provides the write and search commands."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mnemo_tui.catchup import empty_reports, refusals
from mnemo_tui.cli import output, pager
from mnemo_tui.cli.commands import EntryFormat, IncludeHistory, Scope, Since, Until, ctx_of
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.feed import check_limit_flag, parse_times, resolved_scope
from mnemo_tui.cli.hints import room_name_hint
from mnemo_tui.cli.table import TableWriter
from mnemo_tui.engine.rules import MAX_TOP_K as MAX_SEARCH
from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import MAX_CONCEPTS, MAX_CONTENT, MAX_EXTERNAL_REF, MAX_SUPERSEDES, parse_scope, room_of
from mnemo_tui.sanitize import line as safe
from mnemo_tui.values.model import EmptyReport
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest, WriteResult


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


def write(
    ctx: typer.Context,
    content: Annotated[
        str | None,
        typer.Argument(
            metavar="TEXT",
            help="The entry's content; - (or nothing, in a pipe) reads stdin; nothing on a terminal opens $EDITOR.",
        ),
    ] = None,
    scope: Annotated[
        str | None, typer.Option("--scope", "-s", metavar="SCOPE", help="Domain (default general) or xroom:<room_id>.")
    ] = None,
    concept: Annotated[
        list[str] | None, typer.Option("--concept", "-c", metavar="CONCEPT", help="A concept (tag); repeatable.")
    ] = None,
    supersedes: Annotated[
        list[str] | None,
        typer.Option(
            "--supersedes", metavar="ATOM_ID", help="An atom id (or unique prefix) this entry replaces; repeatable."
        ),
    ] = None,
    ref: Annotated[
        str | None,
        typer.Option("--ref", metavar="REF", help="External reference: a repeated write returns the first atom."),
    ] = None,
) -> None:
    """Store an entry; prints its atom_id."""
    c = ctx_of(ctx, creates_store=True)
    if content is None and sys.stdin.isatty():
        content = _from_editor(parse_scope(scope) or "general")
        try:
            result = _store(c, content, scope, concept, supersedes, ref)
        except BaseException:
            # What the person wrote in their editor is not lost with the write (files.keep_unsent).
            from mnemo_tui.files import keep_unsent

            kept = keep_unsent(c.settings.state_path, content)
            output.hint(f"your text is kept in {kept}" if kept else "your text could not be kept")
            raise
    else:
        if content is None or content == "-":
            content = sys.stdin.read()
            if not content.isascii() and any("\ud800" <= ch <= "\udfff" for ch in content):
                # Bytes that are not UTF-8 (kept by Python as lone surrogates): said as what they are.
                raise ValidationError("the input is not valid UTF-8 text (stdin or a file read as text)")
            if content.endswith("\n"):
                content = content[:-1]
        result = _store(c, content, scope, concept, supersedes, ref)
    sys.stdout.write(safe(result.atom_id) + "\n")  # an endpoint answered it
    if not result.created:
        # stdout stays what docs/cli.md fixes (the first atom's id); the person learns nothing new was stored.
        output.hint(f"note: nothing written: --ref '{safe(ref or '')}' was already used by this entry")


def _store(
    c: Context,
    content: str,
    scope: str | None,
    concept: list[str] | None,
    supersedes: list[str] | None,
    ref: str | None,
) -> WriteResult:
    """The entry checked and written (`mnemo write` after its text is read)."""
    if not content.strip():
        raise ValidationError("the entry's content is empty")
    if len(content) > MAX_CONTENT:  # said the same on every backend, with the length given
        raise ValidationError(f"content must be 1 to {MAX_CONTENT} characters, got {len(content)}")
    domain = parse_scope(scope) or "general"
    if scope is not None and room_of(domain) is None:
        own = c.backend.domains()
        # The rooms are asked for only when no own domain has the name (the rule itself is refusals.py's).
        refusal = refusals.write_refusal(domain, c.backend.rooms() if domain not in own else [], own_domains=own)
        if refusal is not None:
            raise ValidationError(refusal)
    concepts = tuple(concept or ())
    replaced = tuple(supersedes or ())
    if len(concepts) > MAX_CONCEPTS:
        raise ValidationError(f"--concept repeats at most {MAX_CONCEPTS} times, got {len(concepts)}")
    if len(replaced) > MAX_SUPERSEDES:
        raise ValidationError(f"--supersedes repeats at most {MAX_SUPERSEDES} times, got {len(replaced)}")
    if ref is not None and not 1 <= len(ref) <= MAX_EXTERNAL_REF:
        raise ValidationError(f"--ref must be 1 to {MAX_EXTERNAL_REF} characters, got {len(ref)}")
    if replaced:
        from mnemo_tui.cli.cmd_atoms import resolve_id

        replaced = tuple(resolve_id(c.backend, value) for value in replaced)
    return c.backend.write(
        WriteRequest(
            content=content,
            domain=domain,
            concepts=concepts,
            external_ref=ref,
            supersedes=replaced,
            agent=c.settings.agent,
            agent_name=c.settings.agent,
            client_env="cli",
        )
    )


def search(
    ctx: typer.Context,
    query: Annotated[
        str | None,
        typer.Argument(metavar="QUERY", help="What to search for (required: without a query, use `mnemo recent`)."),
    ] = None,
    scope: Scope = None,
    order_by: Annotated[str, typer.Option("--order-by", metavar="ORDER", help="relevance or recency.")] = "relevance",
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="How many results, 1-500.")] = 10,
    include_history: IncludeHistory = False,
    fmt: EntryFormat = "table",
) -> None:
    """Search entries (needs a query; `mnemo recent` is the read without one)."""
    c = ctx_of(ctx)
    output.check_format(fmt)
    if query is None or not query.strip():
        raise ValidationError("search needs a query; to list what happened lately, use `mnemo recent`")
    if order_by not in ("relevance", "recency"):
        raise ValidationError(f"--order-by must be relevance or recency, got {order_by!r}")
    check_limit_flag(limit, MAX_SEARCH)
    low, high = parse_times(since, until, utc=c.utc)
    scope_value = resolved_scope(c, parse_scope(scope))
    hits = c.backend.search(
        SearchQuery(
            query=query,
            scope=scope_value,
            order_by="relevance" if order_by == "relevance" else "recency",
            since=low,
            until=high,
            include_history=include_history,
            top_k=min(limit + 1, MAX_SEARCH),  # one more than shown: whether more results exist
        )
    )
    more = len(hits) > limit or len(hits) == MAX_SEARCH
    hits = hits[:limit]
    wires = [h.entry.wire[:-1] + f',"relevance":{h.relevance}}}' for h in hits]
    out = sys.stdout
    if fmt == "ndjson":
        output.ndjson(out, wires)
        if not hits:
            out.flush()
            empty = _search_empty(c, query, scope_value, since, until)
            output.hint(empty.shown)
            room_name_hint(c.backend, empty)
    elif fmt == "json":
        out.write(
            '{"items":[' + ",".join(wires) + f'],"query":{output.dumps(query)},"scope":{output.dumps(scope_value)}}}\n'
        )
    else:
        if not hits:
            empty = _search_empty(c, query, scope_value, since, until)
            out.write(empty.shown + "\n")
            room_name_hint(c.backend, empty)
            return
        with pager.paged(fmt, no_pager=c.no_pager, configured=c.settings.pager):
            TableWriter(sys.stdout, scope=scope_value, utc=c.utc).rows([h.entry for h in hits])
    if more and fmt != "json":
        output.hint(_more_results(limit))


def _more_results(limit: int) -> str:
    """What stderr says when a search had more results than it showed (as `recent` says a cursor remains)."""
    if limit >= MAX_SEARCH:
        return f"More results may exist: {MAX_SEARCH} is the most a search returns; narrow it (--scope, --since, more words)."
    return f"More results exist: {limit} shown; raise --limit (up to {MAX_SEARCH}) or narrow the query."


def _search_empty(c: Context, query: str, scope: str | None, since: str | None, until: str | None) -> EmptyReport:
    """What an empty search covered (the one rule, `empty_reports.for_search`, which the TUI's search shows too)."""
    return empty_reports.for_search(c.backend, query, scope, since=since, until=until)
