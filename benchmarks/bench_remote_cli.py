"""Provides the remote CLI start-up benchmark: `mnemo recent --limit 1` against a real `mnemo serve`, next to a
one-request httpx script that reads its key the same way (the environment, the key file, the OS keyring)."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cli import MNEMO, _compiled, alternate, run_child_cpu

TESTS = (
    Path(__file__).resolve().parents[1]
)  # the repository: tests.support.keyrings.FileKeyring, a real keyring backend
READY = re.compile(r"ready at (http://\S+/api/v1)")
GOAL = "≤ 1.3x"

# The anchors: one request with httpx, the key read as mnemo reads it in each case (argv[1] the endpoint).
_SEND = """
import httpx
answer = httpx.post(sys.argv[1] + "/memory/recent", json={"limit": 1}, headers={"X-Api-Key": key})
answer.raise_for_status()
print(answer.json()["items"][0]["content"])
"""
ANCHORS = {
    "env": "import os, sys\nkey = os.environ['MNEMO_API_KEY']\n" + _SEND,
    "file": "import json, os, sys\nkey = json.load(open(os.path.join(os.environ['MNEMO_HOME'], 'credentials.json')))"
    "[sys.argv[1]]\n" + _SEND,
    "keyring": "import sys, keyring\nkey = keyring.get_password('mnemo', sys.argv[1])\n" + _SEND,
}
HOW = {
    "env": "the key in MNEMO_API_KEY",
    "file": "the key in the `login --insecure-storage` file",
    "keyring": "the key in the OS keyring (keyring's API over a file-backed backend class)",
}


def _base_env(home: Path) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE is dropped: an installed mnemo has its byte code (bench_cli._compiled).
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(MNEMO_HOME=str(home), NO_COLOR="1")
    return env


def _serve(home: Path) -> tuple[subprocess.Popen[str], str, str]:
    """`mnemo serve` on a free loopback port over a store with one entry of `alice`: (process, URL, key)."""
    env = _base_env(home)
    key = subprocess.run([MNEMO, "keys", "create", "alice"], env=env, capture_output=True, text=True, check=True)
    proc = subprocess.Popen(
        [MNEMO, "serve", "--port", "0"], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    assert proc.stderr is not None
    url: list[str] = []
    for line in proc.stderr:
        found = READY.search(line)
        if found:
            url.append(found.group(1))
            break
    assert url, "mnemo serve did not start"
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe drained
    import httpx

    written = httpx.post(
        url[0] + "/memory/write", json={"content": "one entry"}, headers={"X-Api-Key": key.stdout.strip()}
    )
    written.raise_for_status()
    return proc, url[0], key.stdout.strip()


def _client(case: str, root: Path, url: str, key: str) -> dict[str, str]:
    """A client's environment that selects the endpoint and finds its key as `case` says."""
    home = root / case
    home.mkdir()
    env = _base_env(home)
    env["MNEMO_ENDPOINT"] = url
    if case == "env":
        env["MNEMO_API_KEY"] = key
        return env
    if case == "keyring":
        env.update(
            PYTHON_KEYRING_BACKEND="tests.support.keyrings.FileKeyring",
            TEST_KEYRING_FILE=str(home / "keyring.json"),
            PYTHONPATH=os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p),
        )
        args = ["login"]
    else:  # keyring left to find its backends itself, as on a user's machine (here: none usable)
        args = ["login", "--insecure-storage"]
    subprocess.run([MNEMO, *args], env=env, input=key + "\n", capture_output=True, text=True, check=True)
    return env


def _row(case: str, mine: list[float], anchor: list[float], ratios: list[float], what: str) -> dict[str, Any]:
    return {
        "name": f"remote `mnemo recent --limit 1`, {HOW[case]}{what}",
        "value": round(statistics.median(mine) * 1000, 1),
        "unit": "ms",
        "anchor": round(statistics.median(anchor) * 1000, 1),
        "ratio": round(statistics.median(ratios), 2),
        "goal": GOAL if case != "keyring" else "(reported apart)",
        "anchor_is": "a one-request httpx script that reads its key the same way (median of alternated pairs)",
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Each way of giving the key: mnemo's start against its anchor's, alternated, wall and CPU time."""
    _compiled()
    reps = 11 if quick else 31
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-remote-cli-") as tmp:
        root = Path(tmp)
        (root / "server").mkdir()
        proc, url, key = _serve(root / "server")
        try:
            for case in ("env", "file", "keyring"):
                env = _client(case, root, url, key)
                script = root / f"anchor_{case}.py"
                script.write_text(ANCHORS[case])
                mnemo = [MNEMO, "recent", "--limit", "1", "--format", "ndjson"]
                anchor = [sys.executable, str(script), url]
                for _ in range(3):  # warm: byte code written, the server's first answers given
                    assert run_child_cpu(mnemo, env)[3] == 0, f"mnemo recent failed ({case})"
                    assert run_child_cpu(anchor, env)[3] == 0, f"the anchor failed ({case})"
                wall_a, wall_b, cpu_a, cpu_b, walls, cpus = alternate(mnemo, anchor, env, reps)
                rows.append(_row(case, wall_a, wall_b, walls, ""))
                rows.append(_row(case, cpu_a, cpu_b, cpus, ", CPU time (user + system)"))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return rows


if __name__ == "__main__":
    for row in run("--quick" in sys.argv):
        print(json.dumps(row, ensure_ascii=False))
