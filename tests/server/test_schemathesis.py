"""schemathesis over a real `mnemo serve` with the server's own `openapi.json` (issue 56): every check, every
phase (the stateful one included), bounded examples and a fixed seed (`schemathesis.toml` beside this file).
What it may still find is named in docs/server.md ("The published schema"), each with its reason; anything
else fails the test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo_tui.engine.sqlite.store import Store
from tests.support.serve import start_serve

CONFIG = Path(__file__).with_name("schemathesis.toml")
ST = Path(sys.executable).with_name("st")
# The failures docs/server.md names: a schema-valid write refused with 422 for what the hosted schema cannot
# say (a NUL in a stored text; `supersedes` in a batch item, which its description refuses, not its bounds).
NAMED_OPERATIONS = {"POST /api/v1/memory/write", "POST /api/v1/memory/write-batch", "POST /api/v1/memory/write_batch"}
NAMED_REASONS = ("holds a NUL character", "supersedes is refused in a batch")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_schemathesis_finds_nothing_but_what_the_docs_name(isolated_home: Path, tmp_path: Path) -> None:
    assert ST.exists(), "schemathesis is not installed: it is in the dev extra (scripts/setup-dev.sh installs it)"
    store_path = tmp_path / "store.db"
    store = Store(store_path)
    key = store.create_key("fuzz")[1]
    store.close()
    served = start_serve(isolated_home, store=store_path)
    try:
        origin = served.url.removesuffix("/api/v1")
        report = tmp_path / "report.json"
        run = subprocess.run(
            [
                str(ST),
                "--config-file",
                str(CONFIG),
                "run",
                origin + "/openapi.json",
                "--url",
                origin,
                "--header",
                f"X-Api-Key: {key}",
                "--checks",
                "all",
                "--workers",
                "1",
                "--no-color",
                "--report",
                "json",
                "--report-json-path",
                str(report),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=360,
        )
    finally:
        code, log = served.stop()
    out = run.stdout + run.stderr
    assert report.exists(), out[-4000:]
    found = json.loads(report.read_text())
    assert found["complete"] and not found["errors"], out[-4000:]
    assert found["operations"]["tested"] == found["operations"]["total"] >= 45, found["operations"]
    assert {phase: found["phases"][phase]["status"] for phase in found["phases"]}["stateful"] != "skip", found
    unnamed = [
        (failure["code"], operation)
        for failure in found["failures"]
        for operation in failure["operations"]
        if failure["code"] != "ST202" or operation not in NAMED_OPERATIONS
    ]
    assert not unnamed, (unnamed, out[-6000:])
    # and each named one is refused for its named reason: the answer of every ST202 shown says which
    for shown in out.split("- ST202 Schema-valid request rejected")[1:]:
        answer = shown.split("Reproduce with")[0]
        assert "[422]" in answer and any(reason in answer for reason in NAMED_REASONS), answer
    assert found["test_cases"]["generated"] > 500, found["test_cases"]
    assert code == 0 and "Traceback" not in log, log[-3000:]
