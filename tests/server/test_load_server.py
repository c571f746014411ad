"""Sixteen concurrent clients mixing writes and walks against `mnemo serve`: no error, no lost or repeated entry."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,  # a real `mnemo serve` subprocess
]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


@pytest.mark.slow
def test_sixteen_clients_at_once_get_no_error_and_lose_or_repeat_nothing() -> None:
    """The correctness half of benchmarks/bench_load.py, bounded to a few seconds (its timings are not asserted)."""
    import bench_load

    # At least 4 writes or walks a client whatever the clock (its mix is seeded): a loaded machine that starts
    # the clients late cannot leave the run empty.
    alone, loaded = bench_load.measure(quick=True, clients=16, seconds=2.0, least=4)
    for run in (alone, loaded):
        assert run["errors"] == 0, run["error_samples"]
        assert (run["lost"], run["repeated"], run["repeats_in_walks"]) == (0, 0, 0)
    assert loaded["writes"] > 0 and loaded["pages"] > 0, "the clients did not overlap anything"
    assert loaded["server_tracebacks"] == 0
    assert loaded["keys_in_log"] == 0
    rows = bench_load.rows_of(alone, loaded)
    assert {"name", "value", "unit", "anchor", "ratio", "goal"} <= set(rows[0])
    assert [r["value"] for r in rows if "errors" in r["name"] or "lost" in r["name"]] == [0, 0]
