"""`mnemo check`: the four checks pass on healthy backends and fail, naming the check, on broken ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.proof import CHECK_NAMES, PROBE_DOMAIN, CheckReport, run_checks
from mnemo_tui.proof.checks import PROBE_ROOM
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.broken_backends import AnswersEmptySearch, DropsRooms, NeverEnds, OffsetPaging, RepeatsAcrossPages

Factory = Callable[..., Backend]


def verdicts(report: CheckReport) -> dict[str, bool]:
    return {c.name: c.passed for c in report.checks}


def detail(report: CheckReport, name: str) -> str:
    return next(c.detail for c in report.checks if c.name == name)


def test_all_four_checks_pass_on_a_healthy_backend(make_backend: Factory) -> None:
    report = run_checks(make_backend("alice"))
    assert [c.name for c in report.checks] == list(CHECK_NAMES)
    assert report.passed, [c.detail for c in report.checks if not c.passed]
    assert "at the top" in detail(report, "write-while-walking")
    assert "probe room xroom:room_" in detail(report, "empty-scope-names-rooms")


def test_checks_leave_no_probe_or_room_behind_and_pass_again_on_a_second_run(make_backend: Factory) -> None:
    backend = make_backend("alice")
    kept = backend.write(WriteRequest(content="mine", domain="notes")).atom_id
    first = run_checks(backend)
    assert first.passed
    assert "deleted its 8 probe entries" in first.cleanup and "deleted the probe room it created" in first.cleanup
    report = run_checks(backend)
    assert report.passed, [c.detail for c in report.checks if not c.passed]
    assert backend.domains() == ["notes"] and PROBE_DOMAIN not in backend.domains()
    assert backend.rooms() == []
    assert [e.atom_id for e in backend.recent(RecentQuery(include_history=True)).items] == [kept]
    assert "probe entries go to room xroom:room_" in report.probes_note and report.own_store_note == ""


def test_a_probe_room_the_reader_already_owns_is_used_and_kept(make_backend: Factory) -> None:
    backend = make_backend("alice")
    room = backend.create_room(PROBE_ROOM)
    report = run_checks(backend)
    assert report.passed and room.address in detail(report, "empty-scope-names-rooms")
    assert [r.address for r in backend.rooms()] == [room.address]
    assert "probe room" not in report.cleanup


def test_empty_scope_check_names_every_room_including_joined_ones(make_backend: Factory) -> None:
    owner, reader = make_backend("bob"), make_backend("alice")
    room = owner.create_room("ops")
    reader.join(owner.invite(room.address, scope="read").code)
    report = run_checks(reader)
    assert report.passed
    assert "all 2 room(s)" in detail(report, "empty-scope-names-rooms")


def test_without_a_probe_room_a_reader_of_no_room_passes_and_is_told_so(local: LocalBackend) -> None:
    report = run_checks(local, probe_room=False)
    assert report.passed
    assert local.rooms() == []
    assert "belongs to no room" in detail(report, "empty-scope-names-rooms")


def test_checks_run_inside_a_room_scope(make_backend: Factory) -> None:
    backend = make_backend("alice")
    room = backend.create_room("team")
    report = run_checks(backend, scope=room.address)
    assert report.passed, [c.detail for c in report.checks if not c.passed]
    assert f"room {room.address}" in report.probes_note
    # Its author deletes a room entry (docs/server.md): the probes go, as in a domain.
    assert backend.recent(RecentQuery(scope=room.address, limit=100)).items == []
    assert "deleted its 8 probe entries" in report.cleanup


def test_a_backend_that_repeats_an_entry_across_pages_fails_the_walk_check(local: LocalBackend) -> None:
    report = run_checks(RepeatsAcrossPages(local))
    assert not report.passed
    assert verdicts(report)["walk-to-end"] is False
    assert "repeated within the walk" in detail(report, "walk-to-end")
    assert verdicts(report)["search-needs-query"] is True


def test_a_backend_that_drops_rooms_from_its_report_fails_the_empty_scope_check(local: LocalBackend) -> None:
    broken = DropsRooms(local)
    report = run_checks(broken)
    assert verdicts(report) == {
        "walk-to-end": True,
        "write-while-walking": True,
        "empty-scope-names-rooms": False,
        "search-needs-query": True,
    }
    assert "does not name 'mnemo-check' (xroom:room_" in detail(report, "empty-scope-names-rooms")
    # With a probe room the reader already owns, the listing that hides it is caught another way.
    local.create_room(PROBE_ROOM)
    again = run_checks(broken)
    assert verdicts(again)["empty-scope-names-rooms"] is False
    assert "the room listing does not name it" in detail(again, "empty-scope-names-rooms")


def test_a_backend_that_drops_rooms_is_caught_even_when_the_reader_has_rooms_of_its_own(
    make_backend: Factory,
) -> None:
    backend = make_backend("alice")
    backend.create_room("team")
    assert not run_checks(DropsRooms(backend)).passed


def test_offset_paging_fails_the_walk_check_when_a_write_lands_mid_walk(local: LocalBackend) -> None:
    report = run_checks(OffsetPaging(local))
    assert verdicts(report)["walk-to-end"] is False
    assert "repeated within the walk" in detail(report, "walk-to-end")


def test_a_feed_that_never_ends_fails_instead_of_looping(local: LocalBackend) -> None:
    report = run_checks(NeverEnds(local))
    assert verdicts(report)["walk-to-end"] is False
    assert "still handed a cursor after" in detail(report, "walk-to-end")


def test_a_backend_that_answers_a_search_without_query_fails_that_check(local: LocalBackend) -> None:
    report = run_checks(AnswersEmptySearch(local))
    assert verdicts(report)["search-needs-query"] is False
    assert "was answered" in detail(report, "search-needs-query")
    assert verdicts(report)["walk-to-end"] is True


def test_check_never_moves_a_real_consumers_watermark(local: LocalBackend, state: StateDB) -> None:
    assert run_checks(local).passed
    assert state.list(local.identity, local.principal) == []


# -- through the installed console script -----------------------------------------------------


def test_cli_check_json_shape_and_exit_zero(cli: Callable[..., Any]) -> None:
    result = cli("check", "--format", "json")
    assert result.code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["passed"] is True
    assert [c["name"] for c in body["checks"]] == list(CHECK_NAMES)
    assert all(set(c) == {"name", "passed", "detail"} and c["passed"] is True for c in body["checks"])
    assert set(body) == {"passed", "checks"}


def test_cli_check_table_says_where_the_probes_go(cli: Callable[..., Any], isolated_home: Path) -> None:
    result = cli("check")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "probe entries go to room xroom:room_" in lines[0]
    assert [line.split()[0] for line in lines[1:5]] == ["PASS"] * 4
    assert lines[-1] == "4/4 checks passed."
    assert "check deleted its 8 probe entries, deleted the probe room it created" in result.stderr


def test_cli_check_leaves_the_feed_the_rooms_and_the_watermarks_exactly_as_they_were(cli: Callable[..., Any]) -> None:
    assert cli("demo", "--entries", "60", "--seed", "1").code == 0
    assert cli("catchup", "-f", "json").code == 0

    def picture() -> list[str]:
        return [
            cli(*args).stdout
            for args in (
                ("recent", "--all", "--include-history", "-f", "json"),
                ("rooms", "list", "-f", "json"),
                ("watermark", "list", "-f", "json"),
            )
        ]

    before = picture()
    result = cli("check")
    assert result.code == 0, result.stdout + result.stderr
    assert picture() == before


def test_cli_check_exits_one_naming_the_failed_checks(cli: Callable[..., Any]) -> None:
    bob = {"MNEMO_PRINCIPAL": "bob"}
    room = cli("rooms", "create", "readonly", env=bob).stdout.strip()
    code = cli("rooms", "invite", room, "--read-only", env=bob).stdout.strip()
    assert cli("rooms", "join", code).code == 0
    result = cli("check", "--scope", room, "--format", "json")
    assert result.code == 1
    body = json.loads(result.stdout)
    assert body["passed"] is False
    failed = [c for c in body["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["walk-to-end", "write-while-walking"]
    assert "read-only" in failed[0]["detail"]
    table = cli("check", "--scope", room)
    assert table.code == 1
    assert "FAIL  1. walk-to-end" in table.stdout and table.stdout.splitlines()[-1] == "2/4 checks passed."


@pytest.mark.parametrize(
    ("args", "needle"),
    [(("--scope", "xroom:nope"), "room address"), (("--format", "ndjson"), "--format"), (("--scope", " "), "blank")],
)
def test_cli_check_refuses_bad_arguments_with_exit_two(
    cli: Callable[..., Any], args: tuple[str, ...], needle: str
) -> None:
    result = cli("check", *args)
    assert result.code == 2
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_cli_check_and_verify_against_a_served_endpoint(cli: Callable[..., Any], tmp_path: Path) -> None:
    from mnemo_tui.engine.sqlite.store import Store
    from tests.support.wire import served_store

    path = tmp_path / "served.db"
    admin = Store(path)
    _key_id, key = admin.create_key("ci-bot")
    try:
        with served_store(path) as server:
            env = {"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": key}
            result = cli("check", "--format", "json", env=env)
            assert result.code == 0, result.stdout + result.stderr
            assert json.loads(result.stdout)["passed"] is True
            assert key not in result.stdout + result.stderr
            left = cli("recent", "--scope", "mnemo-check", "--all", "--format", "ndjson", env=env)
            assert left.code == 0 and left.stdout == ""  # check deleted its probes through the endpoint
            assert json.loads(cli("rooms", "list", "-f", "json", env=env).stdout) == []
            for i in range(8):
                assert cli("write", f"entry {i}", "--scope", "mnemo-check", env=env).code == 0
            probes = cli("recent", "--scope", "mnemo-check", "--all", "--format", "ndjson", env=env)
            assert len(probes.stdout.splitlines()) == 8
            checked = cli(
                "verify", "--expect", "-", "--scope", "mnemo-check", "--format", "json", input=probes.stdout, env=env
            )
            assert checked.code == 0, checked.stderr
            assert json.loads(checked.stdout)["seen"] == 8
    finally:
        admin.close()


def test_cli_check_against_an_unusable_endpoint_exits_with_that_errors_code(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    from tests.support.wire import served_store

    path = tmp_path / "served.db"
    with served_store(path) as server:
        refused = cli("check", env={"MNEMO_ENDPOINT": server.url, "MNEMO_API_KEY": "mk_live_" + "0" * 32})
    assert refused.code == 3, refused.stderr
    assert refused.stdout == "" and len(refused.stderr.strip().splitlines()) <= 2
    # Nothing listens on port 1: the client retries, then gives up with exit 5 rather than four FAILs.
    gone = cli("check", env={"MNEMO_ENDPOINT": "http://127.0.0.1:1/api/v1", "MNEMO_API_KEY": "mk_live_" + "0" * 32})
    assert gone.code == 5, gone.stderr
    assert gone.stdout == "" and "Traceback" not in gone.stderr
