"""Provides the check and verify commands: proof for CI that a backend keeps the feed contract."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui import timefmt
from mnemo_tui.cli import output
from mnemo_tui.cli.commands import Scope, TableFormat, ctx_of
from mnemo_tui.errors import ExitCode
from mnemo_tui.limits import describe_scope, parse_scope
from mnemo_tui.proof import CheckReport, VerifyResult, read_expected, run_checks
from mnemo_tui.proof import verify as run_verify
from mnemo_tui.sanitize import line as safe
from mnemo_tui.sanitize import quoted

if TYPE_CHECKING:
    from mnemo_tui.proof.ci_reports import Reports

Report = Annotated[
    list[str] | None,
    typer.Option(
        "--report",
        metavar="FORMAT[:PATH]",
        help="Also report where CI reads: junit:PATH, json:PATH, or github (annotations and job summary); repeatable.",
    ),
]


def open_reports(values: list[str] | None, inputs: tuple[str, ...] = ()) -> Reports:
    """The `--report` files, opened before the run (exit 2 if one cannot be); the GitHub hint, once."""
    from mnemo_tui.proof import ci_reports

    reports = ci_reports.Reports(ci_reports.parse(values or [], inputs))
    if os.environ.get("GITHUB_ACTIONS") == "true" and not reports.github:
        output.hint("hint: under GitHub Actions, --report github annotates failures and writes a job summary")
    return reports


def check(
    ctx: typer.Context,
    scope: Annotated[
        str | None,
        typer.Option(
            "--scope",
            "-s",
            metavar="SCOPE",
            help="Where the probe entries go and the walks run: a domain or xroom:<room_id> "
            "(default: the probe room, which no unscoped read covers).",
        ),
    ] = None,
    probe_room: Annotated[
        bool,
        typer.Option(
            "--probe-room/--no-probe-room",
            help="Use a room of its own (mnemo-check, deleted after if check made it): the probes' default place, "
            "and a room check 3 must name.",
        ),
    ] = True,
    fmt: TableFormat = "table",
    report_to: Report = None,
) -> int:
    """Probe the backend's feed with four checks; exit 1 if one fails.

    It writes a few probe entries to --scope (default: a room of its own, so no
    unscoped read or catchup --changes ever shows them; deleted after), walks
    them, and checks:

    \b
    1. walk-to-end: a cursor walk in small pages delivers every probe once, and
       ends.
    2. write-while-walking: an entry written during a walk comes in the next
       catch-up pass, and nothing of the first walk comes again.
    3. empty-scope-names-rooms: an empty unscoped read names the rooms it did not
       read and says how (--scope xroom:...).
    4. search-needs-query: a search with an empty or blank query is refused.

    No watermark of yours is read or moved (the probe reader's state is thrown away).
    """
    output.check_format(fmt, allow_ndjson=False)
    reports = open_reports(report_to)
    with reports.guard("check"):
        c = ctx_of(ctx, creates_store=True)
        report = run_checks(c.backend, scope=scope, probe_room=probe_room)
        _print_check(report, fmt)
        from mnemo_tui.proof import ci_reports

        reports.write(ci_reports.from_check(report))
    return ExitCode.OK if report.passed else ExitCode.FAILED


def _print_check(report: CheckReport, fmt: str) -> None:
    out = sys.stdout
    if fmt == "json":
        out.write(output.dumps(report.wire()) + "\n")
    else:
        out.write(f"mnemo check: {safe(report.target)}; {safe(report.probes_note)}\n")
        width = max(len(r.name) for r in report.checks)
        for number, result in enumerate(report.checks, start=1):
            mark = "PASS" if result.passed else "FAIL"
            out.write(f"{mark}  {number}. {result.name.ljust(width)}  {safe(result.detail)}\n")
        passed = sum(r.passed for r in report.checks)
        out.write(f"{passed}/{len(report.checks)} checks passed.\n")
    if report.cleanup:
        out.flush()
        output.hint(safe(report.cleanup))
    if report.own_store_note:
        output.hint(safe(report.own_store_note))


def verify(
    ctx: typer.Context,
    expect: Annotated[
        str,
        typer.Option(
            "--expect",
            metavar="FILE",
            help="File of expected ids: lines, NDJSON, a JSON array or document (docs/ci.md); - for a pipe.",
        ),
    ],
    scope: Scope = None,
    since: Annotated[
        str | None, typer.Option("--since", metavar="TIME", help="Walk only entries at or after this time.")
    ] = None,
    fmt: TableFormat = "table",
    report_to: Report = None,
) -> int:
    """Every expected id once in the walk, none twice; exit 1 if not."""
    output.check_format(fmt, allow_ndjson=False)
    reports = open_reports(report_to, (expect,))
    with reports.guard("verify"):
        c = ctx_of(ctx)
        scope_value = parse_scope(scope)
        low = timefmt.parse_time(since, field="--since", utc=c.utc) if since is not None else None
        expected = read_expected(expect)
        result = run_verify(c.backend, expected, scope=scope_value, since=low)
        # Raw text (not repr): each output sanitizes it once; repr's escapes would be escaped again.
        where = describe_scope(scope_value, lambda s: f"'{s}'")
        where += f" since {timefmt.to_iso(low)}" if low is not None else ""
        _print_verify(result, where, fmt)
        from mnemo_tui.proof import ci_reports

        reports.write(ci_reports.from_verify(result, where))
    return ExitCode.OK if result.passed else ExitCode.FAILED


def _print_verify(result: VerifyResult, where: str, fmt: str) -> None:
    out = sys.stdout
    if fmt == "json":
        out.write(output.dumps(result.wire()) + "\n")
    else:
        verdict = "PASS" if result.passed else "FAIL"
        out.write(
            f"{verdict}  walked {safe(where)}: {result.seen} distinct entries in {result.pages} page(s); "
            f"{result.expected} expected, {len(result.missing)} missing, {len(result.repeated)} repeated\n"
        )
        for atom_id in result.missing:
            seen = result.sighting(atom_id)
            # An id the backend shows elsewhere says where and what it is; a line without one is unchanged.
            note = f"  ({safe(seen.where)}: {quoted(seen.first_line)})" if seen is not None else ""
            out.write(f"missing   {safe(atom_id)}{note}\n")
        for atom_id in result.repeated:
            out.write(f"repeated  {safe(atom_id)}\n")
