"""A lone surrogate in what a read names (a query, a scope, an author, an atom id) is a validation error naming
the field, on both engines and every door: no driver can encode it, and it was an internal error (issue 55's
leftovers)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mnemo_tui.errors import Unprocessable, ValidationError
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO
from tests.support.targets import Target

LONE = "deploy \ud800"  # valid JSON as "deploy \\ud800"; no character, and UTF-8 cannot carry it

READS: list[tuple[str, Callable[[Any], object]]] = [
    ("query", lambda e: e.search("alice", SearchQuery(query=LONE))),
    ("scope", lambda e: e.search("alice", SearchQuery(query="deploy", scope=LONE))),
    ("exclude_author", lambda e: e.search("alice", SearchQuery(query="deploy", exclude_author=LONE))),
    ("scope", lambda e: e.recent("alice", RecentQuery(scope=LONE))),
    ("scope", lambda e: e.recent_wire("alice", RecentQuery(scope=LONE))),
    ("exclude_author", lambda e: e.recent("alice", RecentQuery(exclude_author=LONE))),
    ("author", lambda e: e.recent("alice", RecentQuery(author=LONE))),
    ("exclude_author", lambda e: list(e.stream_wire("alice", RecentQuery(exclude_author=LONE)))),
    ("atom_id", lambda e: e.get("alice", LONE)),
    ("atom_id", lambda e: e.chain("alice", LONE)),
    ("atom_id", lambda e: e.delete("alice", LONE)),
    ("scope", lambda e: e.position("alice", LONE)),
    ("exclude_author", lambda e: e.entries_after("alice", RecentQuery(exclude_author=LONE), 0, 2**62, 10)),
    ("domain", lambda e: e.count_atoms("alice", LONE)),
    ("external_ref", lambda e: e.by_external_ref("alice", LONE)),
    ("fingerprint", lambda e: e.by_fingerprint("alice", None, LONE)),
    ("seeds.1", lambda e: e.graph("alice", ["deploy", LONE], depth=1, domain=None, min_weight=0.0, limit=10)),
    ("domain", lambda e: e.delete_domain("alice", LONE)),
]


@pytest.mark.parametrize(("field", "read"), READS, ids=[f"{n}-{f}" for n, (f, _) in enumerate(READS)])
def test_a_lone_surrogate_in_a_read_is_refused_naming_the_field_on_both_engines(
    target: Target, field: str, read: Callable[[Any], object]
) -> None:
    engine = target.open()
    try:
        engine.write("alice", WriteRequest("deploy notes", concepts=("deploy",)))
        with pytest.raises(Unprocessable) as refused:  # a UnicodeEncodeError from the driver before
            read(engine)
        assert refused.value.status == 422 and refused.value.exit_code == 2
        assert str(refused.value).startswith(f"{field} holds a lone surrogate"), refused.value
        assert refused.value.details == {"field": field}
        # Nothing was lost: the entry is still there, and an ordinary read still answers.
        assert [h.entry.atom_id for h in engine.search("alice", SearchQuery(query="deploy"))]
    finally:
        engine.close()


def test_a_lone_surrogate_over_the_wire_is_a_422_naming_the_field(target: Target) -> None:
    """`mnemo serve` over both engines: the JSON escape `\\ud800` in a read's body, never a 5xx."""
    from tests.support.wire import served_store

    engine = target.open()
    key = engine.create_key("alice")[1]
    try:
        with served_store(target) as server, httpx.Client(base_url=server.url, headers={"X-Api-Key": key}) as http:
            for path, body, field in (
                ("/memory/read", b'{"query": "deploy \\ud800"}', "query"),
                ("/memory/query", b'{"query": "deploy", "domain": "\\udfff"}', "domain"),
                ("/memory/recent", b'{"domain": "x\\ud800"}', "domain"),
                ("/memory/recent", b'{"exclude_author": "\\ud800"}', "exclude_author"),
            ):
                answer = http.post(path, content=body, headers={"Content-Type": "application/json"})
                assert answer.status_code == 422, (path, answer.text)
                assert field in answer.text, (path, answer.text)
            assert http.post("/memory/recent", json={}).status_code == 200
    finally:
        engine.close()


def test_the_remote_backend_sends_a_lone_surrogate_as_its_escape_and_gets_the_fields_422(target: Target) -> None:
    """`RemoteBackend` cannot encode a surrogate as UTF-8: it sends the JSON escape, and the server names the
    field (it raised a bare UnicodeEncodeError before sending anything)."""
    from mnemo_tui.backends.remote import RemoteBackend
    from tests.support.wire import served_store

    engine = target.open()
    key = engine.create_key("alice")[1]
    try:
        with served_store(target) as server:
            remote = RemoteBackend(server.url, key)
            try:
                for call, field in (
                    (lambda: remote.search(SearchQuery(query=LONE)), "query"),
                    (lambda: remote.recent(RecentQuery(scope=LONE)), "domain"),
                ):
                    with pytest.raises(ValidationError) as refused:
                        call()
                    assert refused.value.exit_code == 2 and field in str(refused.value), refused.value
                assert list(remote.recent(RecentQuery()).items) == []  # the server still answers
            finally:
                remote.close()
    finally:
        engine.close()


def test_the_cli_refuses_a_lone_surrogate_in_a_read_argument_with_exit_2(tmp_path: Path) -> None:
    """Bytes that are no UTF-8 in an argument arrive as lone surrogates: exit 2, never exit 5."""
    store = str(tmp_path / "s.db")
    assert subprocess.run([MNEMO, "--store", store, "write", "deploy"], capture_output=True).returncode == 0
    for args in (
        [b"search", b"deploy \xed\xa0\x80"],
        [b"recent", b"--scope", b"\xed\xa0\x80"],
        [b"show", b"\xed\xa0\x80"],
    ):
        done = subprocess.run([MNEMO.encode(), b"--store", store.encode(), *args], capture_output=True, timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr, done.stderr


def test_over_mcp_a_lone_surrogate_in_a_read_is_replaced_and_served_never_an_internal_error(
    isolated_home: Path,
) -> None:
    """The MCP door replaces a lone surrogate with U+FFFD as it reads the line (docs/mcp.md), so the read is
    served; the engine's refusal stands behind it for any door that does not."""
    pytest.importorskip("mcp")
    from tests.security.raw_mcp import RawMcp

    mcp = RawMcp(isolated_home)
    try:
        hello = b'{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}'
        assert "result" in mcp.ask("initialize", hello)
        mcp.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        assert not mcp.ask("tools/call", b'{"name":"memory_write","arguments":{"content":"deploy"}}')["result"].get(
            "isError"
        )
        for call in (
            b'{"name":"memory_read","arguments":{"query":"deploy \\ud800"}}',
            b'{"name":"memory_list_recent","arguments":{"domain":"\\ud800"}}',
        ):
            answer = mcp.ask("tools/call", call)
            assert "result" in answer and answer["result"]["isError"] is False, answer  # no internal error
            json.dumps(answer)
    finally:
        stderr = mcp.close()
    assert "Traceback" not in stderr, stderr
