"""A listener that stops reading is cut at the send deadline on a real `mnemo serve`, and the server stays
responsive for others meanwhile (docs/mcp.md, "Feeds and subscriptions": `--subscription-send-timeout`).

The stalled listener is a raw TCP socket with a small receive buffer: it sends a 2026-07-28
`subscriptions/listen` of 100 spellings of one scope (each URI its own subscription, so each write to the scope
is 100 notifications) and never reads. A witness of another key listens to the same scope with `httpx` and hears
every write, before the stalled stream's buffers fill, while its sends wait, and after it is cut. The cut is
waited for on the server's own count of its subscriptions (`/metrics`), never for a time."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from mnemo_tui.engine.sqlite.store import Store
from tests.support.mcp_client import WAIT, listen_request
from tests.support.serve import start_serve

SPELLINGS = 100  # one key's bound: every subscription of the stalled listener on one scope
MAX_WRITES = 2000  # a bound on the writes the loop makes while it waits for the cut


def spellings(domain: str, count: int) -> list[str]:
    """`count` URIs of the feed of `domain`, each spelled its own way (some characters percent-encoded)."""
    found: list[str] = []
    for mask in range(count):
        chars = [f"%{ord(ch):02X}" if mask >> i & 1 else ch for i, ch in enumerate(domain)]
        found.append("memory://feed/" + "".join(chars))
    return found


def feed_subscriptions(base: str, key: str) -> int:
    answer = httpx.get(base + "/metrics", headers={"X-Api-Key": key}, timeout=30)
    assert answer.status_code == 200, answer.text
    found = re.search(r"^mnemo_feed_subscriptions (\S+)$", answer.text, re.MULTILINE)
    assert found is not None, answer.text
    return int(float(found.group(1)))


def updates(lines: Iterator[str]) -> Iterator[str]:
    """The URIs of the `notifications/resources/updated` on a listen stream, as they come."""
    for line in lines:
        if line.startswith("data:"):
            message = json.loads(line[5:])
            if message.get("method") == "notifications/resources/updated":
                yield message["params"]["uri"]


def test_a_listener_that_stops_reading_is_cut_at_the_send_deadline_and_others_are_served(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.db")
    stalled_key, witness_key = store.create_key("alice")[1], store.create_key("alice")[1]
    store.close()
    served = start_serve(tmp_path, "--subscription-send-timeout", "1", store=tmp_path / "store.db")
    base = served.url.removesuffix("/api/v1")
    stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        uris = spellings("stalled", SPELLINGS)
        assert len(set(uris)) == SPELLINGS
        headers, body = listen_request(stalled_key, uris)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window it offers
        host, port = base.removeprefix("http://").split(":")
        stalled.connect((host, int(port)))
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        stalled.sendall(
            f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\n{head}content-length: {len(body)}\r\n\r\n".encode() + body
        )
        # It never reads: held once the server counts its 100 subscriptions.
        deadline = time.monotonic() + WAIT
        while feed_subscriptions(base, witness_key) < SPELLINGS:
            assert time.monotonic() < deadline, "the stalled listen was never subscribed"
        witness_headers, witness_body = listen_request(witness_key, ["memory://feed/stalled"])
        with httpx.stream(
            "POST", base + "/mcp", headers=witness_headers, content=witness_body, timeout=WAIT
        ) as witness:
            assert witness.status_code == 200
            heard = updates(witness.iter_lines())
            with httpx.Client(base_url=served.url, headers={"X-Api-Key": witness_key}, timeout=WAIT) as rest:
                writes = 0
                # Each write is 100 notifications for the stalled listener: its buffers fill within a few, its
                # sends then wait, and the send deadline cuts it. Every write is heard by the witness meanwhile.
                while feed_subscriptions(base, witness_key) > 1:
                    assert writes < MAX_WRITES, "the stalled listener was never cut"
                    written = rest.post("/memory/write", json={"content": f"write {writes}", "domain": "stalled"})
                    assert written.status_code == 200, written.text
                    assert next(heard) == "memory://feed/stalled"
                    writes += 1
                assert writes >= 1  # it was cut by its sends waiting, not before any was made
                after = rest.post("/memory/write", json={"content": "after the cut", "domain": "stalled"})
                assert after.status_code == 200, after.text
                assert next(heard) == "memory://feed/stalled"
        assert httpx.get(served.url + "/health", timeout=30).status_code == 200
    finally:
        stalled.close()
        code, log = served.stop()
    assert "a listen stream took no notification within the send deadline: cut" in log
    assert code == 0 and "Traceback" not in log
