"""Empty reports: every kind, the rooms an unscoped read did not search, and nothing named for a scoped read."""

from __future__ import annotations

from collections.abc import Callable

from mnemo_tui.backends import Backend
from mnemo_tui.catchup import empty_reports
from mnemo_tui.values.model import RecentQuery, Watermark
from mnemo_tui.values.writes import WriteRequest

Factory = Callable[..., Backend]


def test_unscoped_empty_report_names_every_room_and_how_to_read_it(make_backend: Factory) -> None:
    alice, bob = make_backend("alice"), make_backend("bob")
    design = alice.create_room("design")
    ops = bob.create_room("ops")
    alice.join(bob.invite(ops.address, scope="read").code)
    alice.write(WriteRequest(content="room talk", domain=design.address))
    report = empty_reports.for_recent(alice, RecentQuery())
    assert report.kind == "empty_scope" and report.scope is None
    assert [(r.name, r.address) for r in report.unsearched_rooms] == [
        ("design", design.address),
        ("ops", ops.address),
    ]
    for room in (design, ops):
        assert room.address in report.text and room.name in report.text
    assert report.text.splitlines()[-1] == "Re-run with --scope set to one of these addresses to read it."
    wire = report.wire()
    assert wire["unsearched_rooms"] == [
        {"name": "design", "address": design.address},
        {"name": "ops", "address": ops.address},
    ]


def test_single_room_instruction_names_its_address(make_backend: Factory) -> None:
    alice = make_backend("alice")
    room = alice.create_room("design")
    report = empty_reports.for_recent(alice, RecentQuery())
    assert report.text.splitlines()[-1] == f"Re-run with --scope {room.address} to read it."


def test_scoped_empty_report_names_no_room(make_backend: Factory) -> None:
    alice = make_backend("alice")
    room = alice.create_room("design")
    for scope in ("ops", room.address):
        report = empty_reports.for_recent(alice, RecentQuery(scope=scope))
        assert report.unsearched_rooms == () and "xroom:…" not in report.text
        assert report.kind == "empty_scope"


def test_no_rooms_is_said_rather_than_implied(make_backend: Factory) -> None:
    report = empty_reports.for_recent(make_backend("alice"), RecentQuery())
    assert "no shared rooms" in report.text and report.unsearched_rooms == ()


def test_each_kind(make_backend: Factory) -> None:
    alice = make_backend("alice")
    alice.write(WriteRequest(content="one"))
    alice.write(WriteRequest(content="two"))
    page = alice.recent(RecentQuery(limit=1))
    assert page.next_cursor is not None
    assert empty_reports.for_recent(alice, RecentQuery(limit=1, cursor=page.next_cursor)).kind == "past_cursor"
    assert empty_reports.for_recent(alice, RecentQuery(until=1)).kind == "no_match"
    assert empty_reports.for_recent(alice, RecentQuery(exclude_author="alice")).kind == "no_match"
    mark = Watermark(scope=None, consumer="bot", created_at=page.items[0].created_at, boundary_ids=(), updated_at=0)
    nothing_new = empty_reports.for_catchup(alice, None, mark, None)
    assert nothing_new.kind == "nothing_new" and "'bot'" in nothing_new.text
    assert empty_reports.for_catchup(make_backend("bob"), None, None, None).kind == "empty_scope"
    assert empty_reports.for_catchup(alice, "ops", None, None).kind == "empty_scope"
