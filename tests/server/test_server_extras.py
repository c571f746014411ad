"""The engine's wire reads (`recent_wire`, `atom_extras`) agree with `Store.recent` exactly."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.writes import WriteRequest


def test_recent_wire_is_store_recent_as_text(store: Store) -> None:
    ids = [
        store.write("alice", WriteRequest(content=f"e{i}", domain="ops" if i % 3 else "general")).atom_id
        for i in range(23)
    ]
    store.write("alice", WriteRequest(content="replaces e1", supersedes=(ids[1],)))
    store.write("bob", WriteRequest(content="bob's"))
    room = store.create_room("alice", "design")
    store.write("alice", WriteRequest(content="in room", domain=room.address))
    queries = [
        RecentQuery(limit=5),
        RecentQuery(limit=100),
        RecentQuery(scope="ops", limit=4),
        RecentQuery(include_history=True, limit=7),
        RecentQuery(exclude_author="bob", limit=3, since=1),
        RecentQuery(scope=room.address, limit=1),
    ]
    for query in queries:
        current = query
        while True:
            page = store.recent("alice", current)
            wire_page = store.recent_wire("alice", current)
            wires, cursor = wire_page.items, wire_page.next_cursor
            assert wires == [e.wire for e in page.items]
            assert cursor == page.next_cursor
            if cursor is None:
                break
            current = current.replace(cursor=cursor)


def test_recent_wire_refuses_what_store_recent_refuses(store: Store) -> None:
    with pytest.raises(Forbidden):
        store.recent_wire("alice", RecentQuery(scope="xroom:room_01ARZ3NDEKTSV4RRFFQ69G5FAV"))
    with pytest.raises(ValidationError):
        store.recent_wire("alice", RecentQuery(cursor="AAAA"))


def test_atom_extras_returns_metadata_and_external_ref(store: Store) -> None:
    a = store.write("alice", WriteRequest(content="x", metadata={"k": [1, 2]}, external_ref="ref-1")).atom_id
    b = store.write("alice", WriteRequest(content="y")).atom_id
    assert store.atom_extras([a, b]) == {a: ({"k": [1, 2]}, "ref-1"), b: ({}, None)}
    assert store.atom_extras([]) == {}


def test_database_work_runs_in_worker_threads_each_with_its_own_connection(tmp_path: Path) -> None:
    from mnemo_tui.server.pool import EnginePool

    pool = EnginePool(lambda: Store(tmp_path / "pool.db"), workers=4)
    # Four calls that each wait for the other three inside their database thread: if they shared
    # one connection (or ran on the event loop) they could never all be inside at once.
    barrier = threading.Barrier(4, timeout=20)
    loop_thread: list[int] = []

    def inside(store: Store) -> tuple[int, int]:
        barrier.wait()
        return threading.get_ident(), id(store.db)

    async def main() -> list[tuple[int, int]]:
        loop_thread.append(threading.get_ident())
        return list(await asyncio.gather(*(pool.run(inside) for _ in range(4))))

    seen = asyncio.run(main())
    pool.close()
    assert len({thread for thread, _ in seen}) == 4 and loop_thread[0] not in {thread for thread, _ in seen}
    assert len({conn for _, conn in seen}) == 4


def _modules_after(statement: str) -> set[str]:
    import subprocess
    import sys

    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_the_server_imports_neither_the_cli_nor_the_tui() -> None:
    loaded = _modules_after("import mnemo_tui.server.app, mnemo_tui.server.run")
    assert not {m for m in loaded if m.startswith(("mnemo_tui.cli", "mnemo_tui.tui", "typer", "textual", "httpx"))}


def test_the_remote_backend_imports_no_server_and_no_ui() -> None:
    loaded = _modules_after("import mnemo_tui.backends.remote")
    assert "httpcore" in loaded  # its HTTP transport (backends/remote_http.py), imported with it and nowhere else
    assert "httpx" not in loaded  # httpx's layer (and the command line it imports) only for a push follow's events
    assert not {m for m in loaded if m.startswith(("starlette", "uvicorn", "textual", "typer", "mnemo_tui.server"))}
