"""Provides the check and verify commands: proof for CI that a backend keeps the feed contract."""

from __future__ import annotations

import sys

from mnemo_tui import timefmt
from mnemo_tui.cli import output
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.options import Args, flag, given, required, scope_opt, table_format_opt, text
from mnemo_tui.model import describe_scope, parse_scope
from mnemo_tui.proof import read_expected, run_checks
from mnemo_tui.proof import verify as run_verify
from mnemo_tui.text import line as safe


class CheckArgs(Args):
    """The four checks of the source document; exit 1 on a failure."""

    creates_store = True

    scope = given(
        "--scope",
        "-s",
        metavar="SCOPE",
        help="Where the probe entries go and the walks run: a domain or xroom:<room_id>.",
        default="mnemo-check",
    )
    probe_room = flag(
        "--probe-room/--no-probe-room",
        help="Make sure a room exists for check 3 to name (a mnemo-check room, deleted after if check made it).",
        default=True,
    )
    fmt = table_format_opt()


def check(c: Context, args: CheckArgs) -> int:

    output.check_format(args.fmt, allow_ndjson=False)
    report = run_checks(c.backend, scope=args.scope, probe_room=args.probe_room)
    out = sys.stdout
    if args.fmt == "json":
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
    return 0 if report.passed else 1


class VerifyArgs(Args):
    """Every expected id once in the walk, none twice; exit 1 if not."""

    expect = required(
        "--expect", metavar="FILE", help="File of expected ids (one a line, or NDJSON with atom_id); - for stdin."
    )
    scope = scope_opt()
    since = text("--since", metavar="TIME", help="Walk only entries at or after this time.")
    fmt = table_format_opt()


def verify(c: Context, args: VerifyArgs) -> int:

    output.check_format(args.fmt, allow_ndjson=False)
    scope_value = parse_scope(args.scope)
    low = timefmt.parse_time(args.since, field="--since", utc=c.utc) if args.since is not None else None
    expected = read_expected(args.expect)
    result = run_verify(c.backend, expected, scope=scope_value, since=low)
    out = sys.stdout
    if args.fmt == "json":
        out.write(output.dumps(result.wire()) + "\n")
    else:
        where = describe_scope(scope_value) + (f" since {timefmt.to_iso(low)}" if low is not None else "")
        verdict = "PASS" if result.passed else "FAIL"
        out.write(
            f"{verdict}  walked {where}: {result.seen} distinct entries in {result.pages} page(s); "
            f"{result.expected} expected, {len(result.missing)} missing, {len(result.repeated)} repeated\n"
        )
        for atom_id in result.missing:
            out.write(f"missing   {safe(atom_id)}\n")
        for atom_id in result.repeated:
            out.write(f"repeated  {safe(atom_id)}\n")
    return 0 if result.passed else 1
