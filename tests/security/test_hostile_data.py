"""Hostile hands III, the data (issue 55): author fields bounded and normalized by the engine behind every door,
concepts bounded, no NaN or infinity stored or answered, malformed files exit 2 naming the line."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_tui.backends import Backend
from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import MAX_ENTRY_WIRE_BYTES, loads
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.security.raw_mcp import RawMcp
from tests.support.cli import MNEMO, CliResult
from tests.support.targets import Target

Cli = Callable[..., CliResult]


def provenance(backend: Backend, atom_id: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(backend.get(atom_id).wire)["provenance"]
    return found


# -- author fields: normalized, as the hosted schema says, whatever the door --------------------------------


@pytest.mark.parametrize(
    ("given", "kept"),
    [(" Claude ", "claude"), ("CLI", "cli"), ("mcp", "mcp"), ("demo", "demo"), ("tui", None), ("x" * 5000, None)],
    ids=["hosted", "ours-upper", "mcp", "demo", "unknown", "long"],
)
def test_author_fields_are_cut_and_an_unknown_client_env_is_null_through_every_door(
    make_backend: Callable[[str], Backend], given: str, kept: str | None
) -> None:
    backend = make_backend("alice")
    written = backend.write(WriteRequest("abc", agent="a" * 5000, agent_name="é" * 1_000, client_env=given))
    seen = provenance(backend, written.atom_id)
    assert (seen["agent"], seen["agent_name"], seen["client_env"]) == ("a" * 200, "é" * 200, kept)
    # What the feed serves is what was stored: one wire text, read back whole.
    page = backend.recent(RecentQuery())
    assert json.loads(page.items[0].wire)["provenance"] == seen


def test_concepts_past_their_bounds_are_refused_naming_the_field_and_nothing_is_stored(
    make_backend: Callable[[str], Backend],
) -> None:
    backend = make_backend("alice")
    too_long = ("ok", "c" * 201)
    too_many = tuple(f"c{i}" for i in range(257))
    # Each concept within its bound, but 256 of them escaped six-fold pass the entry's bound on the wire.
    too_wide = tuple(f"{i:03}" + "\x01" * 197 for i in range(256))
    for concepts, field in ((too_long, "concepts.1"), (too_many, "concepts"), (too_wide, "concepts")):
        with pytest.raises(ValidationError) as refused:
            backend.write(WriteRequest("abc", concepts=concepts))
        assert field in str(refused.value), refused.value
    assert not backend.recent(RecentQuery()).items
    # At the bounds exactly, an entry is stored, and it is within the bound on the wire.
    widest = tuple(f"{i:03}" + "c" * 197 for i in range(256))
    written = backend.write(WriteRequest("é" * 10_000, concepts=widest))
    assert len(backend.get(written.atom_id).wire.encode()) <= MAX_ENTRY_WIRE_BYTES


@pytest.fixture
def served(target: Target) -> Iterator[tuple[str, dict[str, str], Any]]:
    """A real server over the parametrized engine: its URL, a key's headers, and the engine."""
    from tests.support.wire import served_store

    engine = target.open()
    key = engine.create_key("alice")[1]
    try:
        with served_store(target) as server:
            yield server.url, {"X-Api-Key": key}, engine
    finally:
        engine.close()


def test_the_issue_sizes_are_bounded_on_the_wire(served: tuple[str, dict[str, str], Any]) -> None:
    url, headers, _engine = served
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        huge = http.post("/memory/write", json={"content": "abc", "author": {"agent_name": "n" * 1_000_000}})
        assert huge.status_code == 200, huge.text
        item = http.get(f"/memory/atoms/{huge.json()['atom_id']}")
        assert len(item.content) < 2_000 and item.json()["provenance"]["agent_name"] == "n" * 200
        wide = http.post("/memory/write", json={"content": "abc", "concepts": ["w" * 3904] * 256})
        assert wide.status_code == 422 and wide.json()["message"].startswith("concepts.0"), wide.text
        escaped = http.post("/memory/write", json={"content": "abc", "concepts": ["\x01" * 200] * 256})
        assert escaped.status_code == 422 and escaped.json()["message"].startswith("concepts:"), escaped.text
        page = http.post("/memory/recent", json={"limit": 100})
        assert [i["content"] for i in page.json()["items"]] == ["abc"]


def test_the_cli_refuses_a_long_concept_and_cuts_a_long_agent(cli: Cli, tmp_path: Path) -> None:
    store = ["--store", str(tmp_path / "s.db")]
    refused = cli(*store, "write", "abc", "--concept", "c" * 201)
    assert refused.code == 2 and "concepts.0" in refused.stderr and "200 characters" in refused.stderr
    written = cli(*store, "write", "abc", env={"MNEMO_AGENT": "a" * 300})
    assert written.code == 0, written.stderr
    item = json.loads(cli(*store, "recent", "--format", "ndjson").stdout)
    assert item["provenance"]["agent"] == "a" * 200 and item["provenance"]["client_env"] == "cli"


def test_entries_stored_before_the_bounds_stay_readable(cli: Cli, tmp_path: Path) -> None:
    from mnemo_tui.engine.sqlite.store import Store

    path = tmp_path / "old.db"
    store = Store(path)
    atom = store.write("local", WriteRequest("old")).atom_id
    # As a store written before issue 55 holds it: a long agent name and a concept past 200 characters.
    old = {"atom_id": atom, "concepts": ["c" * 5000], "provenance": {"principal": "local", "agent_name": "n" * 9000}}
    wire = json.loads(store.get("local", atom).wire) | old
    with store.transaction() as db:
        db.execute("UPDATE atoms SET wire = ?, concepts = ? WHERE atom_id = ?", (json.dumps(wire), '["c"]', atom))
    store.close()
    shown = cli("--store", str(path), "recent", "--format", "json")
    assert shown.code == 0 and json.loads(shown.stdout)["items"][0]["concepts"] == ["c" * 5000]
    assert cli("--store", str(path), "show", atom[:8]).code == 0


# -- NaN and infinities: refused where a number enters, never answered ----------------------------------------


def test_feedback_of_nan_or_an_infinity_is_refused_by_the_engine(make_backend: Callable[[str], Backend]) -> None:
    backend = make_backend("alice")
    atom = backend.write(WriteRequest("rated")).atom_id
    for outcome in (float("nan"), float("inf"), float("-inf"), 1.5):
        with pytest.raises(ValidationError) as refused:
            backend.feedback([atom], outcome)
        # The engine names the field; a remote backend's body with NaN in it is no JSON, and the server says so.
        assert "outcome" in str(refused.value) or "is not a JSON number" in str(refused.value), refused.value
    assert backend.feedback([atom], 0.25) == 1


def test_a_body_with_an_infinity_reached_by_an_exponent_is_a_422(served: tuple[str, dict[str, str], Any]) -> None:
    url, headers, _engine = served
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        atom = http.post("/memory/write", json={"content": "rated"}).json()["atom_id"]
        for number in (b"1e999", b"-1e999", b"NaN", b"Infinity"):
            body = b'{"atom_ids": ["' + atom.encode() + b'"], "outcome": ' + number + b"}"
            answer = http.post("/memory/feedback", content=body, headers={"Content-Type": "application/json"})
            assert answer.status_code == 422, (number, answer.text)
            loads(answer.content)


def _strict(answer: httpx.Response) -> Any:
    """An answer read as JSON must be: NaN, Infinity and `1e999` refused (`limits.loads`)."""
    assert answer.status_code == 200, answer.text
    return loads(answer.content)


def test_every_stored_number_reads_back_as_json_through_the_server(served: tuple[str, dict[str, str], Any]) -> None:
    url, headers, engine = served
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        atoms = [
            http.post("/memory/write", json={"content": f"deploy note {i}", "concepts": ["deploy", f"c{i}"]}).json()[
                "atom_id"
            ]
            for i in range(4)
        ]
        for atom, outcome in zip(atoms, (-1, 1, 0.5, 5e-324), strict=True):
            _strict(http.post("/memory/feedback", json={"atom_ids": [atom], "outcome": outcome}))
        # As a store written before the engine refused them holds them: PostgreSQL kept NaN, SQLite an infinity.
        odd = [float("inf"), float("-inf")] + ([float("nan")] if engine.kind == "postgres" else [])
        with engine.transaction() as db:
            bucket = engine.own_bucket("alice")
            db.executemany(
                "INSERT INTO feedback(atom_id, bucket, outcome, at) VALUES (?,?,?,?)",
                [(atoms[0], bucket, value, 1) for value in odd],
            )
        stats = _strict(http.get("/memory/stats"))
        assert stats["avg_valence"] == pytest.approx((-1 + 1 + 0.5 + 5e-324) / 4)
        for atom in atoms:
            _strict(http.get(f"/memory/atoms/{atom}"))
            _strict(http.get(f"/memory/atoms/{atom}/chain"))
        _strict(http.post("/memory/read", json={"query": "deploy", "min_relevance": 0}))
        _strict(http.post("/memory/read-batch", json={"queries": [{"query": "deploy note"}]}))
        _strict(http.post("/memory/query", json={"query": "deploy", "min_relevance": 0}))
        graph = _strict(http.post("/memory/graph", json={"seeds": ["deploy"]}))
        assert graph["edges"], graph
        _strict(http.post("/memory/recent", json={"limit": 100}))
        _strict(http.post("/memory/feedback", json={"atom_ids": [atoms[0]], "outcome": 0}))
        for line in http.get("/memory/export").content.splitlines():
            loads(line)


# -- MCP: an infinity reached through an exponent is an invalid argument ---------------------------------------


def test_over_mcp_an_exponent_infinity_and_a_long_concept_are_invalid_arguments(isolated_home: Path) -> None:
    pytest.importorskip("mcp")
    mcp = RawMcp(isolated_home)
    try:
        hello = b'{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}'
        assert "result" in mcp.ask("initialize", hello)
        mcp.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        written = mcp.ask("tools/call", b'{"name":"memory_write","arguments":{"content":"rated"}}')
        assert not written["result"].get("isError"), written
        for number in (b"1e999", b"-1e999"):
            call = b'{"name":"memory_feedback","arguments":{"atom_ids":["00000000-0000-4000-8000-000000000000"],'
            answer = mcp.ask("tools/call", call + b'"outcome":' + number + b"}}")
            assert answer["result"]["isError"] is True and "outcome" in answer["result"]["content"][0]["text"]
        long = json.dumps({"name": "memory_write", "arguments": {"content": "x", "concepts": ["c" * 201]}})
        answer = mcp.ask("tools/call", long.encode())
        assert answer["result"]["isError"] is True and "concepts" in answer["result"]["content"][0]["text"]
    finally:
        stderr = mcp.close()
    assert "Traceback" not in stderr, stderr


# -- malformed files: exit 2 naming the line, nothing stored ---------------------------------------------------


def _export_of(cli: Cli, tmp_path: Path) -> list[str]:
    source = ["--store", str(tmp_path / "source.db")]
    for i in range(3):
        assert cli(*source, "write", f"entry {i}").code == 0
    done = cli(*source, "export")
    assert done.code == 0, done.stderr
    return done.stdout.splitlines()


def _room_line(members: list[dict[str, Any]]) -> str:
    room = {
        "room_id": "room_01JAAAAAAAAAAAAAAAAAAAAAAA",
        "name": "team",
        "description": None,
        "owner": "local",
        "created_at": "2026-12-01T00:00:00.000000Z",
        "archived": False,
        "members": members,
    }
    return json.dumps({"room": room})


DEEP = 200_000
MEMBER = {"principal": "local", "role": "owner", "scope": "read_write", "joined_at": "2026-12-01T00:00:00.000000Z"}


@pytest.mark.parametrize(
    "bad",
    [
        "[" * DEEP + "]" * DEEP,  # a RecursionError, exit 5, before issue 55
        '{"atom_id": ' + "[" * DEEP + "]" * DEEP + "}",
        "NaN",
        "ENTRY_WITH_NAN",
        "ENTRY_WITH_EXPONENT",
        _room_line([MEMBER, MEMBER]),  # an IntegrityError, exit 5, before issue 55
        "ENTRY_WITH_A_LONG_CONCEPT",
        "ENTRY_WITH_A_LONG_PRINCIPAL",
    ],
    ids=["deep", "deep-in-entry", "nan", "nan-in-entry", "exponent", "member-twice", "long-concept", "principal"],
)
def test_a_malformed_import_line_is_exit_2_naming_it_and_nothing_is_stored(
    cli: Cli, tmp_path: Path, target: Target, bad: str
) -> None:
    lines = _export_of(cli, tmp_path)
    entry = json.loads(lines[1])
    odd = {
        "ENTRY_WITH_NAN": json.dumps(entry | {"metadata": {"x": float("nan")}}),
        "ENTRY_WITH_EXPONENT": json.dumps(entry | {"metadata": {}}).replace(
            '"metadata": {}', '"metadata": {"x": 1e999}'
        ),
        "ENTRY_WITH_A_LONG_CONCEPT": json.dumps(entry | {"concepts": ["c" * 201]}),
        "ENTRY_WITH_A_LONG_PRINCIPAL": json.dumps(entry | {"provenance": {"principal": "p" * 201}}),
    }
    file = tmp_path / "bad.ndjson"
    file.write_text("\n".join([*lines[:3], odd.get(bad, bad), *lines[3:]]) + "\n")
    refused = cli(*target.cli, "import", str(file))
    assert refused.code == 2, refused.stderr[-2000:]
    assert f"{file} line 4" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    shown = cli(*target.cli, "recent", "--format", "json")
    assert shown.code in (0, 6) and (shown.code == 6 or json.loads(shown.stdout)["items"] == []), shown.stderr


@pytest.mark.parametrize(
    "text",
    ["[" * DEEP + "]" * DEEP, "{" * DEEP, "ID\n" + '{"atom_id": ' + "[" * DEEP + "]" * DEEP + "}", "[NaN]", "[1e999]"],
    ids=["deep-array", "deep-object", "deep-line", "nan", "exponent"],
)
def test_a_malformed_expect_file_is_exit_2(cli: Cli, tmp_path: Path, text: str) -> None:
    store = ["--store", str(tmp_path / "s.db")]
    atom = cli(*store, "write", "one").stdout.strip()
    file = tmp_path / "expect.txt"
    file.write_text(text.replace("ID", atom))
    refused = cli(*store, "verify", "--expect", str(file))
    assert refused.code == 2 and "--expect" not in refused.stdout, refused.stderr
    assert "Traceback" not in refused.stderr and "internal error" not in refused.stderr, refused.stderr
    if text.startswith("ID"):
        assert "line 2" in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    "bad", ["[" * DEEP + "]" * DEEP, "ENTRY_WITH_A_LONG_CONCEPT", "CUT"], ids=["deep", "concept", "cut"]
)
def test_a_malformed_file_imported_onto_an_endpoint_stores_nothing(
    cli: Cli, tmp_path: Path, served: tuple[str, dict[str, str], Any], bad: str
) -> None:
    url, headers, _engine = served
    lines = _export_of(cli, tmp_path)
    entry = json.loads(lines[1])
    odd = {
        "ENTRY_WITH_A_LONG_CONCEPT": json.dumps(
            entry | {"atom_id": "0" * 8 + entry["atom_id"][8:], "concepts": ["c" * 201]}
        )
    }
    body = [*lines[:-1], odd.get(bad, bad), lines[-1]] if bad != "CUT" else lines[:-1]  # good lines first
    file = tmp_path / "bad.ndjson"
    file.write_text("\n".join(body) + "\n")
    env = {"MNEMO_ENDPOINT": url, "MNEMO_API_KEY": headers["X-Api-Key"]}
    refused = cli("import", str(file), env=env)
    assert refused.code == 2 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert bad == "CUT" or f"{file} line {len(lines)}" in refused.stderr, refused.stderr[-2000:]
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        assert http.post("/memory/recent", json={"limit": 100}).json()["items"] == []


# -- fuzzed through the real doors: the server's answers, the CLI's exit codes -------------------------------

author_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=300),
    st.text(min_size=190, max_size=3_000),
    st.sampled_from(["cursor", " Claude ", "API", "cli", "mcp", "demo", "tui", ""]),
)
authors = st.dictionaries(
    st.sampled_from(["agent", "agent_name", "client_env", "principal", "is_external", "other"]), author_values
)


@pytest.fixture(scope="module")
def wire_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from mnemo_tui.engine.sqlite.store import Store
    from mnemo_tui.server.app import create_app

    path = tmp_path_factory.mktemp("wire") / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    store.close()
    with TestClient(create_app(path, workers=2), raise_server_exceptions=False) as client:
        yield client, key


@settings(max_examples=60)
@given(author=authors, concepts=st.lists(st.text(max_size=260), max_size=4))
def test_any_author_object_is_stored_normalized_or_refused_with_a_json_422(
    wire_app: tuple[Any, str], author: dict[str, Any], concepts: list[str]
) -> None:
    client, key = wire_app
    answer = client.post(
        "/api/v1/memory/write",
        json={"content": "abc", "author": author, "concepts": concepts},
        headers={"X-Api-Key": key},
    )
    body = loads(answer.content)  # every answer is JSON
    if answer.status_code != 200:
        assert answer.status_code == 422, answer.text
        return
    texts = {k: v for k, v in author.items() if k in ("agent", "agent_name", "client_env")}
    assert all(isinstance(v, str | None) for v in texts.values()) and all(len(c) <= 200 for c in concepts)
    item = loads(client.get(f"/api/v1/memory/atoms/{body['atom_id']}", headers={"X-Api-Key": key}).content)
    seen = item["provenance"]
    for field in ("agent", "agent_name"):
        assert seen[field] == (texts[field][:200] if texts.get(field) is not None else None)
    env = (texts.get("client_env") or "api").strip().lower()
    assert seen["client_env"] == (
        env if env in {"cursor", "claude", "chatgpt", "chat", "api", "unknown", "cli", "mcp", "demo"} else None
    )


@settings(max_examples=12)
@given(
    line=st.one_of(
        st.text(max_size=100).filter(lambda t: "\n" not in t and "\r" not in t),
        st.integers(1, 300_000).map(lambda d: "[" * d),
    )
)
def test_a_fuzzed_import_line_is_never_exit_5_through_the_cli(
    tmp_path_factory: pytest.TempPathFactory, line: str
) -> None:
    folder = tmp_path_factory.mktemp("cli-fuzz")
    file = folder / "fuzz.ndjson"
    header = json.dumps(
        {
            "mnemo_export": 1,
            "exported_at": "2026-12-01T00:00:00Z",
            "backend": "embedded",
            "source": "f",
            "principal": "local",
            "scopes": [None],
            "since": None,
        }
    )
    file.write_text(header + "\n" + line + "\n", encoding="utf-8", errors="surrogatepass")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")} | {"MNEMO_HOME": str(folder)}
    store = folder / "new.db"
    done = subprocess.run(
        [MNEMO, "--store", str(store), "import", str(file)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr  # no end line follows, whatever the line is
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert not store.exists()  # nothing of it stored, not even the file
