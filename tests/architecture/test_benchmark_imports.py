"""Tests that no benchmark module imports another in a circle (what several share lives in `benchmarks/_*.py`)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The benchmark modules `path` imports anywhere in it (at the top or inside a function)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & modules - {path.stem}


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (its modules in order, the first repeated at the end), or None."""
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> list[str] | None:
        if name in trail:
            return [*trail[trail.index(name) :], name]
        if name in done:
            return None
        for other in sorted(graph[name]):
            found = visit(other, [*trail, name])
            if found is not None:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, [])
        if found is not None:
            return found
    return None


def test_the_benchmark_modules_import_each_other_in_no_circle() -> None:
    paths = sorted(BENCHMARKS.glob("*.py"))
    modules = {path.stem for path in paths}
    assert {"bench_wrk", "bench_load", "run"} <= modules
    graph = {path.stem: imports_of(path, modules) for path in paths}
    assert "bench_wrk" in graph["bench_load"]  # the load suite runs the wrk figures too: the graph is read
    assert circle(graph) is None


def test_a_circle_is_found_where_there_is_one() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) is None
