"""The HTTP edges of `mnemo serve` (docs/security.md): routing on the raw path, bounded headers and connections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from serve_process import start_serve


def test_a_domain_with_a_slash_is_wiped_through_its_escaped_segment(isolated_home: Path, cli: Any) -> None:
    key = cli("keys", "create", "alice").stdout.strip()
    served = start_serve(isolated_home)
    try:
        with httpx.Client(base_url=served.url, headers={"X-Api-Key": key}, timeout=10) as client:
            for content, domain in (("a", "team/alpha"), ("b", "team/alpha"), ("c", "team"), ("d", "team%2Falpha")):
                written = client.post("/memory/write", json={"content": content, "domain": domain})
                assert written.status_code == 200, written.text
            wiped = client.delete("/memory/domain/team%2Falpha")
            assert wiped.status_code == 200, wiped.text
            assert wiped.json()["domain"] == "team/alpha" and wiped.json()["deleted"] == 2
            # Each segment is decoded once: `%25` is a percent sign, never the start of another escape.
            once = client.delete("/memory/domain/team%252Falpha")
            assert once.json()["domain"] == "team%2Falpha" and once.json()["deleted"] == 1
            # An escaped slash never splits a segment: this names no endpoint.
            assert client.delete("/memory/domain/team%2Falpha/x").status_code == 404
            assert client.post("/memory%2Frecent", json={}).status_code == 404
            left = client.post("/memory/recent", json={"limit": 10}).json()["items"]
        assert [item["content"] for item in left] == ["c"]
    finally:
        served.stop()
