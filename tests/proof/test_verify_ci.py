"""The CI recipe of docs/ci.md, run for real: a producer writes, a consumer catches up with a cached state database, verify asserts."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def ci_run(cli: Callable[..., Any], cache: Path, workspace: Path, run: int) -> tuple[list[str], list[str]]:
    """One workflow run: restore the state cache, produce, catch up, verify; save the cache on success."""
    workspace.mkdir()
    state = workspace / ".mnemo-state" / "state.db"
    if cache.exists():  # actions/cache restore
        shutil.copytree(cache, state.parent)
    env = {"MNEMO_STATE": str(state), "MNEMO_CONSUMER": "ci-consumer", "MNEMO_STORE": str(cache.parent / "store.db")}
    produced = []
    for step in ("checkout", "build", "test", "package"):
        result = cli("write", f"run {run}: {step} finished", "--scope", "ci-demo", "--concept", "ci", env=env)
        assert result.code == 0, result.stderr
        produced.append(result.stdout.strip())
    (workspace / "produced.txt").write_text("\n".join(produced) + "\n")
    caught = cli("catchup", "--scope", "ci-demo", "--format", "ndjson", env=env)
    assert caught.code == 0, caught.stderr
    checked = cli("verify", "--expect", str(workspace / "produced.txt"), "--scope", "ci-demo", "--since", "1h", env=env)
    assert checked.code == 0, checked.stdout + checked.stderr
    delivered = [json.loads(line)["atom_id"] for line in caught.stdout.splitlines()]
    shutil.rmtree(cache, ignore_errors=True)  # actions/cache save (post-job, on success)
    shutil.copytree(state.parent, cache)
    return produced, delivered


def test_the_documented_ci_job_catches_everything_once_across_runs(cli: Callable[..., Any], tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "mnemo-state"
    cache.parent.mkdir()
    first_produced, first_delivered = ci_run(cli, cache, tmp_path / "run1", 1)
    assert sorted(first_delivered) == sorted(first_produced)
    second_produced, second_delivered = ci_run(cli, cache, tmp_path / "run2", 2)
    # The watermark came through the cache: the second run delivers only what it produced, once each.
    assert sorted(second_delivered) == sorted(second_produced)
    assert not set(second_delivered) & set(first_produced)


def test_without_the_cache_the_consumer_reads_again_but_misses_nothing(cli: Callable[..., Any], tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "mnemo-state"
    cache.parent.mkdir()
    first_produced, _ = ci_run(cli, cache, tmp_path / "run1", 1)
    shutil.rmtree(cache)  # a cache miss, or a failed job whose state was not saved
    second_produced, second_delivered = ci_run(cli, cache, tmp_path / "run2", 2)
    assert set(second_produced) <= set(second_delivered)
    assert sorted(second_delivered) == sorted(first_produced + second_produced)
