"""The 1 MiB limit over a real socket: `mnemo serve` answers 413 without waiting for the body."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from wire_servers import served_store

from mnemo_tui.engine.store import Store


def _answer(sock: socket.socket) -> tuple[int, dict[str, object]]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection without an answer"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split(b" ")[1]), json.loads(body)


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
        status, body = _answer(sock)
    store.close()
    assert status == 413 and body["code"] == "PAYLOAD_TOO_LARGE"
