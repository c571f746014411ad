"""Fuzz what a hostile hand feeds the engine (issue 55): import lines, `--expect` files and author fields. Bad input
is a refusal of the project's own (exit 2, or 4 for a room one may not write), never another exception (exit 5, a
traceback); a refused import stores nothing; everything stored or answered is JSON a strict reader reads."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import MnemoError
from mnemo_tui.limits import MAX_ENTRY_WIRE_BYTES, loads
from mnemo_tui.portable.load import load
from mnemo_tui.proof.verify import parse_expected
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest

HEADER = json.dumps(
    {
        "mnemo_export": 1,
        "exported_at": "2026-12-01T00:00:00.000000Z",
        "backend": "embedded",
        "source": "fuzz",
        "principal": "local",
        "scopes": [None],
        "since": None,
    }
)
END = json.dumps({"end": {"entries": 1, "rooms": 0, "secrets_left_out": 0, "cursor": "e30"}})
ENTRY: dict[str, Any] = {
    "atom_id": "0a0a0a0a-0000-4000-8000-000000000000",
    "content": "a fact",
    "domain": "general",
    "created_at": "2026-11-30T07:00:00.123456Z",
    "concepts": ["fact"],
    "provenance": {"principal": "local", "agent": None, "agent_name": None, "client_env": "cli", "is_external": False},
    "metadata": {},
    "external_ref": None,
}
MEMBER = {"principal": "local", "role": "owner", "scope": "read_write", "joined_at": "2026-12-01T00:00:00.000000Z"}
ROOM = {
    "room_id": "room_01JAAAAAAAAAAAAAAAAAAAAAAA",
    "name": "team",
    "description": None,
    "owner": "local",
    "created_at": "2026-12-01T00:00:00.000000Z",
    "archived": False,
    "members": [MEMBER],
}

# JSON values, floats with NaN and the infinities among them (Python writes them; JSON has none).
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=300),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
nested = st.integers(min_value=1, max_value=300_000).map(lambda depth: "[" * depth + "]" * depth)


@st.composite
def entry_lines(draw: st.DrawFn) -> str:
    """An entry line with one field, or one of its provenance, replaced by a hostile value."""
    entry = json.loads(json.dumps(ENTRY))
    field = draw(st.sampled_from([*ENTRY, "supersedes", "superseded_by", "provenance.principal", "provenance.agent"]))
    value = draw(values | st.text(max_size=300) | st.lists(st.text(max_size=300), max_size=300))
    if field.startswith("provenance."):
        entry["provenance"][field.split(".")[1]] = value
    else:
        entry[field] = value
    return json.dumps(entry)


@st.composite
def room_lines(draw: st.DrawFn) -> str:
    room = json.loads(json.dumps(ROOM))
    if draw(st.booleans()):
        room["members"] = draw(st.lists(st.sampled_from([MEMBER, {**MEMBER, "principal": "bob"}]), max_size=4))
    else:
        room[draw(st.sampled_from(sorted(ROOM)))] = draw(values)
    return json.dumps({"room": room})


lines = st.one_of(
    entry_lines(),
    room_lines(),
    nested,
    values.map(json.dumps),
    st.text(max_size=200).filter(lambda t: "\n" not in t and "\r" not in t),
    st.just(json.dumps(ENTRY)),
)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Any]:
    """A factory of fresh stores: one per example."""
    made: list[Store] = []
    counter = iter(range(1_000_000))

    def make() -> Store:
        made.append(Store(tmp_path / f"fuzz-{next(counter)}.db"))
        return made[-1]

    yield make
    for store in made:
        store.close()


@given(body=st.lists(lines, min_size=1, max_size=5), ended=st.booleans())
@example(body=["[" * 200_000 + "]" * 200_000], ended=True)  # a RecursionError, exit 5, before issue 55
@example(body=[json.dumps({"room": {**ROOM, "members": [MEMBER, MEMBER]}})], ended=True)  # an IntegrityError
@example(body=[json.dumps(ENTRY | {"metadata": {"x": float("nan")}})], ended=True)
@example(body=[json.dumps(ENTRY).replace('"metadata": {}', '"metadata": {"x": 1e999}')], ended=True)
def test_an_import_file_is_stored_whole_or_refused_with_nothing_stored(
    fresh: Any, body: list[str], ended: bool
) -> None:
    store = fresh()
    text = "\n".join([HEADER, *body, *([END] if ended else [])]) + "\n"
    try:
        load(LocalBackend(store, "local"), io.BytesIO(text.encode("utf-8", "surrogatepass")), "fuzz.ndjson")
    except MnemoError as exc:
        assert exc.exit_code in (2, 4), exc
        assert "fuzz.ndjson" in str(exc)  # the file, and its line where one is at fault
        with store.reading() as db:
            assert db.execute("SELECT (SELECT count(*) FROM atoms) + (SELECT count(*) FROM rooms)").fetchone()[0] == 0
        return
    for entry in store.recent("local", RecentQuery(limit=100, include_history=True)).items:
        item = loads(entry.wire)
        assert len(entry.wire.encode()) <= MAX_ENTRY_WIRE_BYTES + 1_000  # and its principal, at most 200 characters
        assert len(item["provenance"].get("agent") or "") <= 200


ids = st.uuids().map(str)
expect_texts = st.one_of(
    st.text(max_size=400),
    nested,
    nested.map(lambda deep: "{" + deep),
    st.lists(ids | values, max_size=6).map(lambda items: json.dumps(items)),
    st.lists(ids.map(lambda i: json.dumps({"atom_id": i})) | values.map(json.dumps) | ids, max_size=6).map("\n".join),
    st.dictionaries(st.sampled_from(["atom_id", "items", "x"]), values | ids, max_size=3).map(json.dumps),
)


@given(text=expect_texts)
@example(text="[" * 200_000 + "]" * 200_000)
@example(text=str(uuid.UUID(int=1)) + "\n" + "[" * 200_000)
@example(text="[NaN]")
@example(text="[1e999]")
def test_an_expect_file_is_ids_or_a_refusal(text: str) -> None:
    try:
        expected = parse_expected(text, "fuzz.txt")
    except MnemoError as exc:
        assert exc.exit_code == 2 and "fuzz.txt" in str(exc), exc
        return
    assert all(str(uuid.UUID(i)) == i for i in expected)


author_texts = st.one_of(
    st.none(),
    st.text(max_size=400),
    st.text(min_size=190, max_size=5_000),
    st.sampled_from(["cursor", " Claude ", "CHATGPT", "chat", "api", "unknown", "cli", "mcp", "demo", "tui", ""]),
)


@given(agent=author_texts, agent_name=author_texts, client_env=author_texts)
@example(agent="\ud800", agent_name=None, client_env=None)  # a UnicodeEncodeError, exit 5, before issue 55
@example(agent=None, agent_name="n" * 1_000_000, client_env="x" * 1_000)
def test_author_fields_are_stored_normalized_or_refused(
    store: Store, agent: str | None, agent_name: str | None, client_env: str | None
) -> None:
    try:
        written = store.write("alice", WriteRequest("abc", agent=agent, agent_name=agent_name, client_env=client_env))
    except MnemoError as exc:
        assert exc.exit_code == 2, exc
        assert any(ch == "\x00" or 0xD800 <= ord(ch) <= 0xDFFF for ch in f"{agent}{agent_name}{client_env}")
        return
    item = loads(store.get("alice", written.atom_id).wire)
    seen = item["provenance"]
    assert seen["agent"] == (agent[:200] if agent is not None else None)
    assert seen["agent_name"] == (agent_name[:200] if agent_name is not None else None)
    env = client_env.strip().lower() if client_env is not None else None
    allowed = {"cursor", "claude", "chatgpt", "chat", "api", "unknown", "cli", "mcp", "demo"}
    assert seen["client_env"] == (env if env in allowed else None)
