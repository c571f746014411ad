"""The 1 MiB limit over a real socket: `mnemo serve` answers 413 without waiting for the body."""

from __future__ import annotations

import socket
from pathlib import Path

from mnemo_tui.engine.sqlite.store import Store
from tests.support.wire import read_answer, served_store


def test_an_oversized_body_is_refused_before_it_is_sent_whole(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    store = Store(path)
    key = store.create_key("alice")[1]
    with served_store(path) as server, socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        # Announce 64 MiB, send 13 bytes of it, and wait: only an early refusal can answer this.
        sock.sendall(
            b"POST /api/v1/memory/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"X-Api-Key: {key}\r\nContent-Length: {64 << 20}\r\n\r\n".encode()
            + b'{"content": "'
        )
        status, body = read_answer(sock)
    store.close()
    assert status == 413 and body["code"] == "PAYLOAD_TOO_LARGE"
