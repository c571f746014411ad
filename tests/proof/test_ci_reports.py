"""`check` and `verify --report`: JUnit (validated against junit-10.xsd), JSON, GitHub commands and job summary."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.proof import ci_reports
from mnemo_tui.proof.ci_reports import Case, Proof
from mnemo_tui.values.writes import WriteRequest
from tests.support.ci_reports import junit_cases, unescape, workflow_commands
from tests.support.cli import MNEMO, on_terminal, terminal_env
from tests.support.wire import refusing_port, serving, without_accept

Cli = Callable[..., Any]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
HOSTILE = "50% done\r\n::error::injected, a:b %0A::warning title=x::two\x1b[31m"


def write(cli: Cli, content: str, scope: str = "w", *extra: str) -> str:
    result = cli("write", content, "--scope", scope, *extra)
    assert result.code == 0, result.stderr
    return result.stdout.strip()


# -- the workflow-command grammar ----------------------------------------------------------------


@settings(derandomize=True, max_examples=300)
@given(st.text())
def test_escaping_round_trips_and_leaves_no_line_break(value: str) -> None:
    data, prop = ci_reports.escape_data(value), ci_reports.escape_property(value)
    assert "\r" not in data + prop and "\n" not in data + prop
    assert ":" not in prop and "," not in prop
    assert unescape(data) == value and unescape(prop) == value


def test_hostile_text_in_a_report_cannot_end_an_annotation_or_start_another(tmp_path: Path) -> None:
    cases = (Case("walk-to-end", False, HOSTILE), Case("ids, with: colons", False, "x", (HOSTILE,), "missing id"))
    proof = Proof("verify", HOSTILE, cases, {"passed": False})
    lines = ci_reports.annotation_lines(proof)
    commands = workflow_commands("\n".join(lines) + "\n")
    assert [c.name for c in commands] == ["error", "error"]
    assert commands[0].properties == {"title": "mnemo verify: walk-to-end"}
    assert commands[1].properties == {"title": "mnemo verify: ids, with: colons"}
    # The sanitizer shows the line break (`\\r\\n`, one) and the ESC; the escaping keeps the `%` and the `::`
    # inside the message.
    assert commands[0].message == "50% done⏎::error::injected, a:b %0A::warning title=x::two\\x1b[31m"
    assert commands[1].message == "missing id " + commands[0].message


def test_hostile_store_text_stays_inside_its_annotation(cli: Cli) -> None:
    old = write(cli, HOSTILE.replace("\r\n", " ") + "\nsecond line")
    write(cli, "the newer revision", "w", "--supersedes", old)
    result = cli("verify", "--expect", "-", "--scope", "w", "--report", "github", input=old)
    assert result.code == 1
    commands = workflow_commands(result.stderr)
    assert len(commands) == 1 and commands[0].properties["title"] == "mnemo verify: every-expected-id-walked"
    assert commands[0].message.startswith(f"missing id {old} (superseded by ")
    assert commands[0].message.endswith("::error::injected, a:b %0A::warning title=x::two\\x1b[31m')")


def test_annotations_are_capped_with_a_notice_counting_the_rest(cli: Cli) -> None:
    ghosts = [str(uuid.uuid4()) for _ in range(13)]
    result = cli("verify", "--expect", "-", "--report", "github", input="\n".join(ghosts))
    assert result.code == 1
    commands = workflow_commands(result.stderr)
    assert [c.name for c in commands] == ["error"] * 10 + ["notice"]
    assert [c.message for c in commands[:10]] == [f"missing id {g}" for g in ghosts[:10]]
    assert commands[10].message.startswith("3 more failure(s) not annotated")


def test_the_job_summary_is_appended_and_shows_stored_text_literally(cli: Cli, tmp_path: Path) -> None:
    old = write(cli, "<script>alert(1)</script> | **bold** [link](http://x)")
    write(cli, "newer", "w", "--supersedes", old)
    summary = tmp_path / "summary.md"
    summary.write_text("# an earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"}
    result = cli("verify", "--expect", "-", "--scope", "w", "--report", "github", input=old, env=env)
    assert result.code == 1 and "hint:" not in result.stderr
    text = summary.read_text()
    assert text.startswith("# an earlier step\n### mnemo verify: FAIL\n")
    assert "| ❌ | every-expected-id-walked |" in text and "| ✅ | no-id-walked-twice |" in text
    assert f"- {old.replace('-', chr(92) + '-')}" in text
    assert "<script>" not in text and "\\<script\\>" in text and "\\*\\*bold\\*\\*" in text and "\\|" in text


def test_the_summary_lists_ids_while_its_budget_lasts() -> None:
    items = tuple(f"{uuid.uuid4()} (superseded by {uuid.uuid4()}: 'x')" for _ in range(20_000))
    proof = Proof("verify", "t", (Case("every-expected-id-walked", False, "many", items, "missing id"),), {})
    text = ci_reports.summary(proof, 100_000)
    assert len(text.encode()) <= 100_000
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert listed[-1] == f"- … and {20_000 - len(listed) + 1} more: --report junit:PATH or json:PATH lists them all"


# -- JUnit, JSON and exit codes ----------------------------------------------------------------------


def test_a_passing_check_writes_four_passed_cases_and_its_json_document(cli: Cli, tmp_path: Path) -> None:
    junit, doc = tmp_path / "check.xml", tmp_path / "check.json"
    result = cli("check", "--report", f"junit:{junit}", "--report", f"json:{doc}")
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.startswith("mnemo check: ") and "4/4 checks passed." in result.stdout
    cases = junit_cases(junit)
    assert list(cases) == ["walk-to-end", "write-while-walking", "empty-scope-names-rooms", "search-needs-query"]
    assert {kind for kind, _ in cases.values()} == {"passed"}
    assert json.loads(doc.read_text())["passed"] is True
    assert [c["name"] for c in json.loads(doc.read_text())["checks"]] == list(cases)


@pytest.mark.parametrize("command", ["check", "verify"])
def test_an_unreachable_endpoint_is_exit_5_and_a_pass_in_no_format(cli: Cli, tmp_path: Path, command: str) -> None:
    junit, doc, summary = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "summary.md"
    junit.write_text("<testsuites/>")  # an earlier run's report: it must not survive as this run's
    doc.write_text('{"passed": true}')
    args = ["verify", "--expect", "-"] if command == "verify" else ["check"]
    with refusing_port() as sock:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1"
        env = {"MNEMO_API_KEY": "mk_live_" + "1" * 32, "GITHUB_STEP_SUMMARY": str(summary)}
        reports = ["--report", f"junit:{junit}", "--report", f"json:{doc}", "--report", "github"]
        result = cli("--endpoint", url, *args, *reports, input=str(uuid.uuid4()), env=env)
    assert result.code == 5 and result.stdout == "" and "Traceback" not in result.stderr
    cases = junit_cases(junit)
    assert len(cases) == (4 if command == "check" else 2)
    assert all(kind == "error" and "could not run (exit 5)" in why for kind, why in cases.values())
    document = json.loads(doc.read_text())
    assert document["passed"] is False and document["error"]["exit_code"] == 5
    [annotation] = workflow_commands(result.stderr)
    assert annotation.name == "error" and annotation.properties["title"] == f"mnemo {command} could not run"
    assert f"### mnemo {command}: COULD NOT RUN (exit 5)" in summary.read_text()


def test_stdout_is_unchanged_by_reports_and_github_actions_gets_one_hint(cli: Cli, tmp_path: Path) -> None:
    ids = [write(cli, f"entry {i}") for i in range(3)]
    plain = cli("verify", "--expect", "-", "--scope", "w", input="\n".join(ids))
    hinted = cli("verify", "--expect", "-", "--scope", "w", input="\n".join(ids), env={"GITHUB_ACTIONS": "true"})
    reported = cli(
        "verify", "--expect", "-", "--scope", "w", "--report", f"junit:{tmp_path / 'r.xml'}", input="\n".join(ids)
    )
    assert plain.code == hinted.code == reported.code == 0
    assert plain.stdout == hinted.stdout == reported.stdout and plain.stdout.startswith("PASS  walked domain 'w'")
    assert plain.stderr == "" and reported.stderr == ""
    assert hinted.stderr.count("--report github") == 1 and not workflow_commands(hinted.stderr)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("xml:out.xml", "must be one of junit, json, github"),
        ("junit", "needs a file"),
        ("json:", "needs a file"),
        ("github:out.txt", "takes no path"),
        ("junit:{tmp}", "cannot write --report file"),
        ("junit:{tmp}/a-file/r.xml", "cannot write --report file"),
    ],
)
def test_a_bad_report_value_is_exit_2_before_anything_runs(cli: Cli, tmp_path: Path, value: str, needle: str) -> None:
    (tmp_path / "a-file").write_text("")
    result = cli("check", "--report", value.format(tmp=tmp_path))
    assert result.code == 2 and needle in result.stderr and result.stdout == ""
    assert "Traceback" not in result.stderr and not (tmp_path / "home" / "store.db").exists()


def test_the_same_report_twice_or_to_stdout_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    result = cli("check", "--report", f"json:{tmp_path}/a", "--report", f"junit:{tmp_path}/a")
    assert result.code == 2 and "given twice" in result.stderr
    result = cli("check", "--report", "json:-")
    assert result.code == 2 and "stdout carries the result" in result.stderr
    for path in ("/dev/stdout", "/proc/self/fd/1"):  # review #22: the same stdout by another name
        result = cli("check", "--report", f"json:{path}")
        assert result.code == 2 and "stdout carries the result" in result.stderr and result.stdout == "", path


def test_a_report_over_the_expect_file_is_refused_before_it_empties_it(cli: Cli, tmp_path: Path) -> None:
    ids = [write(cli, "kept"), str(uuid.uuid4())]
    expect = tmp_path / "ids.txt"
    expect.write_text("\n".join(ids))
    same = tmp_path / "." / "ids.txt"
    result = cli("verify", "--expect", str(expect), "--report", f"json:{same}")
    assert result.code == 2 and "would overwrite the file it reads" in result.stderr
    assert expect.read_text() == "\n".join(ids)


# -- a failing proof names the same ids in every format ------------------------------------------------


class Tampering:
    """The app `mnemo serve` runs, with a defect in its feed: `drop` hides one id from every page,
    `repeat` hands back the last entry of the previous page again at the top of the next."""

    def __init__(self, app: Any, mode: str, victim: str = "") -> None:
        self.app, self.mode, self.victim = app, mode, victim
        self.last: dict[str, Any] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/memory/recent"):
            await self.app(scope, receive, send)
            return
        scope = without_accept(scope)  # one page of JSON a request, which it rewrites
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def tamper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            page = json.loads(b"".join(chunks))
            items = page.get("items", [])
            if self.mode == "drop":
                items = [i for i in items if i["atom_id"] != self.victim]
            elif self.last is not None and items:
                items.insert(0, self.last)
            if page.get("items"):
                self.last = page["items"][-1]
            body = json.dumps({**page, "items": items}).encode()
            keep = [(k, v) for k, v in start["headers"] if k.lower() not in (b"content-length", b"x-mnemo-wire")]
            await send({**start, "headers": [*keep, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, tamper)


@pytest.fixture
def broken_server(tmp_path: Path) -> Iterator[Callable[..., tuple[str, str, list[str]]]]:
    """`broken_server(mode)`: a served store of 250 entries with a defect; yields (url, key, ids)."""
    from mnemo_tui.server.app import create_app

    path = tmp_path / "served.db"
    admin = Store(path)
    _key_id, key = admin.create_key("alice")
    ids = [admin.write("alice", WriteRequest(f"entry {i}", "d")).atom_id for i in range(250)]
    apps: list[Any] = []
    servers: list[Any] = []

    def start(mode: str) -> tuple[str, str, list[str]]:
        apps.append(create_app(path, workers=2))
        servers.append(serving(Tampering(apps[-1], mode, ids[7])))
        return servers[-1].__enter__().url, key, ids

    yield start
    for server, app in zip(servers, apps, strict=True):
        server.__exit__(None, None, None)
        app.state.pool.close()
    admin.close()


@pytest.mark.parametrize("mode", ["drop", "repeat"])
def test_a_failing_walk_names_the_same_ids_in_every_format(
    cli: Cli, tmp_path: Path, broken_server: Callable[..., tuple[str, str, list[str]]], mode: str
) -> None:
    url, key, ids = broken_server(mode)
    junit, doc, summary = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "summary.md"
    env = {"MNEMO_API_KEY": key, "GITHUB_STEP_SUMMARY": str(summary)}
    reports = ["--report", f"junit:{junit}", "--report", f"json:{doc}", "--report", "github"]
    result = cli("--endpoint", url, "verify", "--expect", "-", "--scope", "d", *reports, input="\n".join(ids), env=env)
    assert result.code == 1, result.stderr
    document = json.loads(doc.read_text())
    wrong = document["missing"] if mode == "drop" else document["repeated"]
    assert document["passed"] is False
    assert (document["missing"], len(document["repeated"])) == (([ids[7]], 0) if mode == "drop" else ([], 2))
    label, case = ("missing", "every-expected-id-walked") if mode == "drop" else ("repeated", "no-id-walked-twice")
    shown = result.stdout.splitlines()[1:]
    assert [line.split()[0] for line in shown] == [label] * len(wrong)
    assert [line.split()[1] for line in shown] == wrong
    kind, why = junit_cases(junit)[case]
    assert kind == "failure" and all(i in why for i in wrong)
    annotated = [re.findall(UUID, c.message)[0] for c in workflow_commands(result.stderr)]
    assert annotated == wrong
    assert all(i in summary.read_text().replace("\\-", "-") for i in wrong)


def test_a_server_that_repeats_an_id_fails_check_alike_in_every_format(
    cli: Cli, tmp_path: Path, broken_server: Callable[..., tuple[str, str, list[str]]]
) -> None:
    url, key, _ids = broken_server("repeat")
    junit, doc = tmp_path / "r.xml", tmp_path / "r.json"
    env = {"MNEMO_API_KEY": key}
    reports = ["--report", f"junit:{junit}", "--report", f"json:{doc}", "--report", "github"]
    result = cli("--endpoint", url, "check", "--scope", "probes", *reports, env=env)
    assert result.code == 1, result.stderr
    walk = json.loads(doc.read_text())["checks"][0]
    assert walk["name"] == "walk-to-end" and walk["passed"] is False and "repeated within the walk" in walk["detail"]
    repeated = walk["detail"].split("repeated within the walk: ")[1].split(";")[0].split(" (")[0]
    assert "FAIL  1. walk-to-end" in result.stdout and repeated in result.stdout
    kind, why = junit_cases(junit)["walk-to-end"]
    assert kind == "failure" and repeated in why
    [annotation] = [c for c in workflow_commands(result.stderr) if c.properties["title"] == "mnemo check: walk-to-end"]
    assert annotation.message == walk["detail"]


# -- verify --expect: its input shapes ----------------------------------------------------------------


@pytest.mark.parametrize("shape", ["lines", "ndjson", "array", "array-of-items", "recent-json", "one-item"])
def test_verify_reads_every_documented_expect_shape(cli: Cli, shape: str) -> None:
    ids = [write(cli, f"entry {i}") for i in range(3)]
    items = [{"atom_id": i, "content": "x"} for i in ids]
    text = {
        "lines": "\n".join(ids),
        "ndjson": "\n".join(json.dumps(i) for i in items),
        "array": json.dumps(ids, indent=2),
        "array-of-items": json.dumps(items),
        "recent-json": cli("recent", "--scope", "w", "--format", "json").stdout,
        "one-item": json.dumps(items[0], indent=2),
    }[shape]
    expected = 1 if shape == "one-item" else 3
    result = cli("verify", "--expect", "-", "--scope", "w", "--format", "json", input=text)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["expected"] == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('["not closed"', "starts with '[' but is not a JSON array"),
        ('[{"content": "x"}]', "item 1 is neither an id nor a JSON object"),
        ('{"items": 3}', "neither atom_id nor a list of items"),
        ('{"atom_id": 1}\n{"x": 2}', "line 1 is a JSON object without a string atom_id"),
    ],
)
def test_verify_refuses_a_malformed_expect_document_with_exit_2(cli: Cli, text: str, needle: str) -> None:
    result = cli("verify", "--expect", "-", input=text)
    assert result.code == 2 and needle in result.stderr and "Traceback" not in result.stderr


def test_expect_dash_on_a_terminal_is_refused_instead_of_waiting(isolated_home: Path) -> None:
    env = terminal_env(isolated_home, NO_COLOR="1")
    proc = on_terminal([MNEMO, "verify", "--expect", "-"], env=env, terminal=("stdin",))
    assert proc.code == 2 and "stdin is a terminal" in proc.stderr


def test_a_missing_id_seen_elsewhere_is_named_with_its_first_line(cli: Cli, tmp_path: Path) -> None:
    old = write(cli, "deploy plan v1\nmore text")
    write(cli, "deploy plan v2", "w", "--supersedes", old)
    elsewhere = write(cli, "\n  notes of another domain", "other")
    ghost = str(uuid.uuid4())
    junit = tmp_path / "r.xml"
    expect = "\n".join([old, elsewhere, ghost])
    table = cli(
        "verify", "--expect", "-", "--scope", "w", "--report", f"junit:{junit}", "--report", "github", input=expect
    )
    assert table.code == 1
    lines = table.stdout.splitlines()[1:]
    assert lines[0].startswith(f"missing   {old}  (superseded by ") and lines[0].endswith(": 'deploy plan v1')")
    assert lines[1] == f"missing   {elsewhere}  (outside the scope walked (domain 'other'): 'notes of another domain')"
    assert lines[2] == f"missing   {ghost}"
    _kind, why = junit_cases(junit)["every-expected-id-walked"]
    assert "'deploy plan v1'" in why and "'notes of another domain'" in why and ghost in why
    assert [c.message for c in workflow_commands(table.stderr)][1:] == [
        f"missing id {elsewhere} (outside the scope walked (domain 'other'): 'notes of another domain')",
        f"missing id {ghost}",
    ]
    document = cli("verify", "--expect", "-", "--scope", "w", "--format", "json", input=expect)
    assert json.loads(document.stdout)["missing"] == [old, elsewhere, ghost]


@pytest.mark.parametrize("text", ["", "\n# only a comment\n", "[]", '{"items": []}'])
def test_verify_with_no_expected_id_is_exit_2_never_a_pass(cli: Cli, tmp_path: Path, text: str) -> None:
    """Review #6: an --expect that holds no id proves nothing, and is said so in every report."""
    write(cli, "an entry")
    doc = tmp_path / "r.json"
    result = cli("verify", "--expect", "-", "--report", f"json:{doc}", input=text)
    assert result.code == 2 and "no ids in --expect stdin" in result.stderr, result.stderr
    assert "PASS" not in result.stdout and json.loads(doc.read_text()).get("passed") is not True


def test_a_room_entry_outside_the_own_store_walk_is_said_to_be_in_its_room(cli: Cli, tmp_path: Path) -> None:
    """Review #5: a room entry verified without --scope is outside the walk, not lost by it, in every format."""
    created = cli("rooms", "create", "build-fleet", "--format", "json")
    assert created.code == 0, created.stderr
    address = json.loads(created.stdout)["address"]
    mine = write(cli, "own entry")
    theirs = write(cli, "fleet entry", address)
    junit = tmp_path / "r.xml"
    result = cli(
        "verify", "--expect", "-", "--report", f"junit:{junit}", "--report", "github", input=f"{mine}\n{theirs}"
    )
    assert result.code == 1, result.stderr
    said = "(outside the scope walked (room 'build-fleet'): 'fleet entry')"
    assert result.stdout.splitlines()[1] == f"missing   {theirs}  {said}"
    assert [c.message for c in workflow_commands(result.stderr)] == [f"missing id {theirs} {said}"], result.stderr
    _kind, why = junit_cases(junit)["every-expected-id-walked"]
    assert said in why and "shown by id but not by the walk" not in why


def test_control_characters_in_verify_text_are_escaped_once(cli: Cli, tmp_path: Path) -> None:
    """Review #19: a scope or an --expect line holding ESC shows as one escape, not a repr escaped again."""
    bad = cli("verify", "--expect", "-", input="x\x1b]0;T\x07\n")
    assert bad.code == 2 and "'x\\x1b]0;T\\x07' is not an atom id" in bad.stderr, bad.stderr
    atom = write(cli, "one", "d\x1b[31m")
    junit = tmp_path / "r.xml"
    result = cli("verify", "--expect", "-", "--scope", "d\x1b[31m", "--report", f"junit:{junit}", input=atom)
    assert result.code == 0, result.stderr
    assert "walked domain 'd\\x1b[31m' of your own store" in result.stdout and "\x1b" not in result.stdout
    assert "domain 'd\\x1b[31m'" in junit.read_text() and "\\\\x1b" not in junit.read_text()
