"""Provides the four checks of the source document, run against any `Backend`, each a pass or fail with evidence."""

from __future__ import annotations

import secrets
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from mnemo_tui import timefmt
from mnemo_tui.backends import Backend
from mnemo_tui.catchup import empty_reports
from mnemo_tui.catchup.catchup import CatchUp, CatchupResult
from mnemo_tui.catchup.walk import default_overlap
from mnemo_tui.errors import AuthError, Conflict, LocalStateError, MnemoError, RateLimited, Unavailable, ValidationError
from mnemo_tui.limits import parse_scope, room_of
from mnemo_tui.proof.recorder import Recorder, RunawayWalk, ServedPage
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import Entry, RecentQuery, Value
from mnemo_tui.values.rooms import Room
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest

PROBE_DOMAIN = "mnemo-check"
PROBE_ROOM = "mnemo-check"
PROBE_CONSUMER = "mnemo-check"
SEED_PROBES = 7
WALK_LIMIT = 3
# Seven probes at three a page need three pages; the slack covers other writers landing meanwhile.
MAX_PAGES = 60
# Errors that say nothing about the feed contract: the backend cannot be reached or used at all.
# They end the run with their own exit code (3, 5, 6) instead of turning into failed checks.
FATAL = (AuthError, Unavailable, RateLimited, LocalStateError)
CHECK_NAMES = ("walk-to-end", "write-while-walking", "empty-scope-names-rooms", "search-needs-query")


class CheckResult(Value):
    """One check's verdict and the evidence behind it."""

    name: str
    passed: bool
    detail: str

    def wire(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


class CheckReport(Value):
    """All four verdicts, and where the probes went (`why_domain`: why an own domain had to take them)."""

    checks: tuple[CheckResult, ...]
    scope: str
    target: str
    cleanup: str = ""
    why_domain: str = ""

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def probes_note(self) -> str:
        where = f"room {self.scope}" if room_of(self.scope) else f"domain {self.scope!r}"
        return f"probe entries go to {where}; the walks stay inside it"

    @property
    def own_store_note(self) -> str:
        """Said when the probes went to an own domain: the own store's readers see them (docs/proof.md)."""
        if room_of(self.scope):
            return ""
        why = f" ({self.why_domain})" if self.why_domain else ""
        return (
            f"note: the probes went to an own domain{why}, so an unscoped `mnemo catchup --changes` "
            "reports their removal; without --scope they go to the probe room, which no unscoped read covers"
        )

    def wire(self) -> dict[str, Any]:
        """docs/cli.md: `{"passed": bool, "checks": [{"name", "passed", "detail"}]}`."""
        return {"passed": self.passed, "checks": [c.wire() for c in self.checks]}


def _short(atom_id: str) -> str:
    return atom_id[:8]


def _probe(scope: str, text: str, run_id: str) -> WriteRequest:
    return WriteRequest(
        content=f"mnemo check {text} (run {run_id}); safe to delete",
        domain=scope,
        concepts=("mnemo-check",),
        agent="mnemo-check",
        agent_name="mnemo check",
        client_env="cli",
    )


def run_checks(
    backend: Backend,
    *,
    scope: str | None = None,
    overlap: int | None = None,
    probe_room: bool = True,
) -> CheckReport:
    """Run the four checks against a backend; never touches any real consumer's watermark.

    Args:
        backend: the backend under test (embedded or endpoint).
        scope: where the probe entries are written and walked: a domain or a room; None (the default):
            the probe room, so no unscoped read (nor its `--changes`) ever sees them (docs/proof.md);
            the domain `mnemo-check` when there is no probe room.
        overlap: microseconds the watermark pass re-reads below the watermark (default: the walk's,
            as `catchup` uses).
        probe_room: ensure the reader belongs to at least one room (a room named `mnemo-check` it owns,
            else one created for the run and deleted after), so the empty-scope check has a room it must name.

    Raises:
        ValidationError: a blank or malformed scope.
        AuthError, Unavailable, RateLimited, LocalStateError: the backend cannot be used at all;
            that is not a verdict on the feed, so no check is reported.
    """
    if scope is not None and parse_scope(scope) is None:
        raise ValidationError("check needs a scope for its probe entries (default: its probe room)")
    if overlap is None:
        overlap = default_overlap(backend)
    run_id = secrets.token_hex(4)
    written: list[str] = []
    created: list[Room] = []
    try:
        room = _probe_room(backend, created) if probe_room else _ProbeRoom(" (no probe room: --no-probe-room)")
        why_domain = ""
        if scope is None:
            scope = room.room.address if room.room is not None else PROBE_DOMAIN
            why_domain = "" if room.room is not None else room.why
        walk, probe = _walk_checks(backend, scope, overlap, run_id, written)
        checks = (walk, probe, _empty_scope_check(backend, room), _search_check(backend, scope))
    finally:
        cleanup = _clean_up(backend, scope or PROBE_DOMAIN, written, created)
    target = f"{backend.kind} backend {backend.identity} as {backend.principal}"
    return CheckReport(checks=checks, scope=scope, target=target, cleanup=cleanup, why_domain=why_domain.strip(" ()"))


def _clean_up(backend: Backend, scope: str, written: list[str], created: list[Room]) -> str:
    """Delete what the checks wrote (the probes, and the probe room if they created it); say what is left.

    The probe consumer's watermark and checkpoints live in a throwaway state database, gone already.
    """
    said: list[str] = []
    deleted = 0
    refused: MnemoError | None = None
    for atom in written:
        try:
            deleted += backend.delete(atom)
        except FATAL:
            raise
        except MnemoError as exc:
            refused = exc
    if deleted:
        said.append(f"deleted its {deleted} probe {'entry' if deleted == 1 else 'entries'}")
    if deleted < len(written):
        left = len(written) - deleted
        why = f" ({refused.message})" if refused is not None else ""
        said.append(f"left {left} probe {'entry' if left == 1 else 'entries'} in {scope}{why}")
    for room in created:
        try:
            backend.delete_room(room.room_id)
            said.append(f"deleted the probe room it created ({room.address})")
        except FATAL:
            raise
        except MnemoError as exc:
            said.append(f"left the probe room it created, {room.address} ({exc.message})")
    return "check " + ", ".join(said) + "; its throwaway watermark and checkpoints are gone" if said else ""


# -- checks 1 and 2: one walk with a write landing after its first page, then the next pass -------


def _walk_checks(
    backend: Backend, scope: str, overlap: int, run_id: str, written: list[str]
) -> tuple[CheckResult, CheckResult]:
    walk_name, probe_name = CHECK_NAMES[0], CHECK_NAMES[1]
    try:
        for i in range(SEED_PROBES):  # each id kept as it is written, so the clean-up finds it whatever fails
            written.append(backend.write(_probe(scope, f"probe {i + 1}/{SEED_PROBES}", run_id)).atom_id)
        seeded = list(written)
        low = backend.get(seeded[0]).created_at
    except FATAL:
        raise
    except MnemoError as exc:
        why = f"could not write the probe entries to {scope}: {exc.message}"
        return CheckResult(walk_name, False, why), CheckResult(probe_name, False, why)
    mid_walk: list[str] = []

    def write_after_first_page(served: int) -> None:
        if served == 1 and not mid_walk:
            mid_walk.append(backend.write(_probe(scope, "mid-walk probe", run_id)).atom_id)
            written.append(mid_walk[-1])

    with tempfile.TemporaryDirectory(prefix="mnemo-check-") as tmp:
        state = StateDB(Path(tmp) / "state.db")
        try:
            first = Recorder(backend, max_pages=MAX_PAGES, before_page=write_after_first_page)
            try:
                result_a, _ = _pass(first, state, scope, overlap, low)
            except FATAL:
                raise
            except (MnemoError, RunawayWalk) as exc:
                why = f"the walk failed: {_message(exc)}"
                return CheckResult(walk_name, False, why), CheckResult(probe_name, False, why)
            walk = _judge_walk(first.pages, seeded, scope)
            second = Recorder(backend, max_pages=MAX_PAGES)
            try:
                result_b, delivered_b = _pass(second, state, scope, overlap, low)
            except FATAL:
                raise
            except (MnemoError, RunawayWalk) as exc:
                return walk, CheckResult(probe_name, False, f"the next pass from the watermark failed: {_message(exc)}")
            probe = _judge_probe(first.pages, mid_walk, result_a, result_b, delivered_b)
        finally:
            state.close()
    return walk, probe


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, MnemoError) else str(exc)


def _pass(recorder: Recorder, state: StateDB, scope: str, overlap: int, low: int) -> tuple[CatchupResult, list[Entry]]:
    """One catch-up pass of the probe consumer, on the throwaway state database."""
    delivered: list[Entry] = []
    walk = CatchUp(recorder, state, consumer=PROBE_CONSUMER, scope=scope, limit=WALK_LIMIT, overlap=overlap, since=low)
    result = walk.run(delivered.extend)
    return result, delivered


def _judge_walk(pages: list[ServedPage], seeded: list[str], scope: str) -> CheckResult:
    ids = [i for p in pages for i in p.ids]
    counts = Counter(ids)
    repeated = [i for i, n in counts.items() if n > 1]
    missing = [i for i in seeded if i not in counts]
    oversized = [n + 1 for n, p in enumerate(pages) if len(p.ids) > WALK_LIMIT]
    sizes = "+".join(str(len(p.ids)) for p in pages)
    evidence = (
        f"{SEED_PROBES} probes written to {scope}, walked with limit {WALK_LIMIT}: {len(pages)} page(s) ({sizes}), "
        f"{len(ids)} entries, {len(counts)} distinct; the walk ended on a page with no cursor"
    )
    problems = []
    if repeated:
        problems.append(f"{len(repeated)} id(s) repeated within the walk: {', '.join(map(_short, repeated))}")
    if missing:
        problems.append(f"{len(missing)} probe(s) never returned: {', '.join(map(_short, missing))}")
    if oversized:
        problems.append(f"page(s) {', '.join(map(str, oversized))} held more than the limit of {WALK_LIMIT}")
    if problems:
        return CheckResult(CHECK_NAMES[0], False, "; ".join(problems) + f" ({evidence})")
    return CheckResult(CHECK_NAMES[0], True, evidence + "; no id repeated, no probe missing")


def _judge_probe(
    pages: list[ServedPage],
    mid_walk: list[str],
    result_a: CatchupResult,
    result_b: CatchupResult,
    delivered_b: list[Entry],
) -> CheckResult:
    name = CHECK_NAMES[1]
    if not mid_walk:
        return CheckResult(name, False, "the walk ended with its first page, so no write could land mid-walk")
    probe = mid_walk[0]
    for n, page in enumerate(pages):
        if probe in page.ids:
            return CheckResult(
                name, False, f"the probe {_short(probe)} written after page 1 appeared in that same walk (page {n + 1})"
            )
    walked = {i for p in pages for i in p.ids}
    ids_b = [e.atom_id for e in delivered_b]
    mark = result_a.after.created_at if result_a.after is not None else None
    since = f"from the watermark {timefmt.to_iso(mark)}" if mark is not None else "with no watermark committed"
    again = [i for i in ids_b if i in walked]
    if again:
        return CheckResult(name, False, f"the next pass {since} delivered {len(again)} entries of the first walk again")
    if probe not in ids_b:
        return CheckResult(
            name, False, f"the probe {_short(probe)} was not in the next pass {since} ({len(ids_b)} delivered)"
        )
    position = ids_b.index(probe)
    where = "at the top" if position == 0 else f"at position {position + 1}, below {position} newer write(s)"
    return CheckResult(
        name,
        True,
        f"the probe {_short(probe)} written after page 1 was not in that walk; the next pass {since} returned it "
        f"{where} ({len(ids_b)} new; {result_b.repeats_skipped} already delivered at the watermark instant, not shown again)",
    )


# -- check 3: an unscoped read that comes back empty names every room -------------------------


class _ProbeRoom:
    """The probe room the run uses (`room`), or why there is none (`why`, or `defect`: the backend is at fault)."""

    def __init__(self, why: str = "", room: Room | None = None, defect: str = "") -> None:
        self.why = why
        self.room = room
        self.defect = defect


def _probe_room(backend: Backend, created: list[Room]) -> _ProbeRoom:
    """The room named `mnemo-check` the reader owns, else one created now (appended to `created`, deleted at the
    end): where the probes go by default, and a room check 3's empty report must name."""
    try:
        listed = backend.rooms()
    except FATAL:
        raise
    except MnemoError as exc:
        return _ProbeRoom(f" (the rooms could not be listed: {exc.message})")
    for room in listed:
        if room.name == PROBE_ROOM and room.role == "owner":
            return _ProbeRoom(f", including the probe room {room.address}", room)
    try:
        room = backend.create_room(
            PROBE_ROOM, "Probe room of `mnemo check`: its probes go here; an unscoped empty read must name it."
        )
    except Conflict:
        return _ProbeRoom(
            defect=f"the reader owns a room named {PROBE_ROOM!r} (creating it again was refused as taken), "
            "but the room listing does not name it"
        )
    except FATAL:
        raise
    except MnemoError as exc:
        return _ProbeRoom(f" (the probe room could not be created: {exc.message})")
    created.append(room)
    return _ProbeRoom(f", including the probe room {room.address} (created now)", room)


def _empty_scope_check(backend: Backend, probe: _ProbeRoom) -> CheckResult:
    name = CHECK_NAMES[2]
    if probe.defect:
        return CheckResult(name, False, probe.defect)
    note = probe.why
    try:
        listed = backend.rooms()
        expected = [
            *listed,
            *([probe.room] if probe.room and probe.room.address not in {r.address for r in listed} else []),
        ]
        query, newest = _empty_unscoped_read(backend)
        if newest == "busy":
            return CheckResult(name, False, "no empty unscoped read: entries kept arriving past the newest, 5 times")
        report = empty_reports.for_recent(backend, query)
    except FATAL:
        raise
    except MnemoError as exc:
        return CheckResult(name, False, f"the unscoped read failed: {exc.message}")
    problems = []
    if report.scope is not None:
        problems.append(f"the report covers {report.scope!r}, not the unscoped store")
    named = {r.address for r in report.unsearched_rooms}
    unnamed = [r for r in expected if r.address not in named or r.address not in report.text]
    if unnamed:
        problems.append("the report does not name " + ", ".join(f"{r.name!r} ({r.address})" for r in unnamed))
    if expected and "Re-run with --scope" not in report.text:
        problems.append("the report does not say how to read the rooms (no 'Re-run with --scope')")
    first = report.text.splitlines()[0] if report.text else ""
    evidence = f"an unscoped read since {newest} came back empty: {first!r}"
    if problems:
        return CheckResult(name, False, "; ".join(problems) + f" ({evidence})")
    if not expected:
        return CheckResult(name, True, evidence + f"; the reader belongs to no room and the report says so{note}")
    return CheckResult(
        name,
        True,
        f"{evidence}; it names all {len(expected)} room(s) the reader belongs to{note} "
        "and ends with 'Re-run with --scope …'",
    )


def _empty_unscoped_read(backend: Backend) -> tuple[RecentQuery, str]:
    """An unscoped read from just after the newest entry the backend returns, so no clock is trusted."""
    query = RecentQuery(limit=1)
    for _ in range(5):
        top = backend.recent(RecentQuery(limit=1))
        if not top.items:
            query = RecentQuery(limit=1)
            label = "the start (the own store is empty)"
        else:
            newest = top.items[0].created_at
            query = RecentQuery(since=newest + 1, limit=1)
            label = f"{timefmt.to_iso(newest + 1)} (just after the newest entry)"
        if not backend.recent(query).items:
            return query, label
    return query, "busy"


# -- check 4: search without a query is refused ----------------------------------------------


def _search_check(backend: Backend, scope: str) -> CheckResult:
    name = CHECK_NAMES[3]
    refusals = []
    for text in ("", "   "):
        try:
            hits = backend.search(SearchQuery(query=text, scope=scope))
        except ValidationError as exc:
            refusals.append(exc.message)
            continue
        except FATAL:
            raise
        except MnemoError as exc:
            return CheckResult(name, False, f"a search with query {text!r} failed ({exc.code}) instead of a refusal")
        return CheckResult(
            name, False, f"a search with query {text!r} was answered ({len(hits)} hits) instead of refused"
        )
    return CheckResult(name, True, f"an empty and a blank query were both refused: {refusals[0]!r}")
