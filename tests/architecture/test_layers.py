"""The layers of docs/architecture.md, held by CI: every import of the package, inside functions too, points one way."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mnemo_tui"

# Each layer may import its own and those to its left, never one to its right.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "mnemo_tui",
        "mnemo_tui.limits",
        "mnemo_tui.values",
        "mnemo_tui.dburl",
        "mnemo_tui.errors",
        "mnemo_tui.timefmt",
        "mnemo_tui.sqlitefile",
        "mnemo_tui.migrations",
        "mnemo_tui.files",
        "mnemo_tui.sanitize",
    ),
    ("mnemo_tui.engine", "mnemo_tui.state"),
    ("mnemo_tui.backends",),
    ("mnemo_tui.catchup", "mnemo_tui.proof", "mnemo_tui.portable"),
    ("mnemo_tui.cli", "mnemo_tui.tui", "mnemo_tui.server", "mnemo_tui.agents"),
)
# Siblings that must not know each other although they share a layer.
INDEPENDENT = (
    ("mnemo_tui.engine", "mnemo_tui.state"),
    ("mnemo_tui.engine.sqlite", "mnemo_tui.engine.postgres"),
    ("mnemo_tui.tui", "mnemo_tui.server"),
    ("mnemo_tui.tui", "mnemo_tui.cli"),
    ("mnemo_tui.server", "mnemo_tui.cli"),
    ("mnemo_tui.agents", "mnemo_tui.cli"),
    ("mnemo_tui.agents", "mnemo_tui.tui"),
    ("mnemo_tui.agents", "mnemo_tui.server"),
)
# The engine's two implementations: the shared operations of engine/ are written against `engine.base` and
# spelled by `engine.dialect`, so no module of engine/ outside these two imports either.
ENGINES = ("mnemo_tui.engine.sqlite", "mnemo_tui.engine.postgres")
# No module of the package is over this many lines (docs/architecture.md).
MAX_LINES = 600
# The one crossing of `agents` and `server`: the server mounts the agents' face at /mcp (`server/mcp_mount.py`
# imports `agents/http.py`), inside a function, so a server without the mcp extra never loads it; the agents
# know nothing of the server (its engine reaches them as a `Runner`).
MOUNTED = (("mnemo_tui.server.mcp_mount", "mnemo_tui.agents.http"),)
# `cli` starts the TUI and the server from the commands that run them: never at import time.
STARTED_BY_CLI = ("mnemo_tui.tui", "mnemo_tui.server", "mnemo_tui.agents")
# Third-party packages each only one part of mnemo may import.
OWNED = {
    "textual": ("mnemo_tui.tui",),
    "rich": ("mnemo_tui.tui",),
    "typer": ("mnemo_tui.cli.commands", "mnemo_tui.cli"),
    "httpx": ("mnemo_tui.backends.remote_http",),  # a push follow's events, for httpx-sse's decoder only
    "httpcore": ("mnemo_tui.backends.remote_http",),  # the remote transport; opened with a remote backend only
    "httpx_sse": ("mnemo_tui.backends.remote_follow",),  # the push follow's decoder; opened by a follow only
    "msgspec": ("mnemo_tui.backends.remote_wire",),  # the remote feed's page read; not by the embedded recent
    "starlette": ("mnemo_tui.server",),  # the server is a Starlette app (the `mcp` SDK's own framework)
    "uvicorn": ("mnemo_tui.server",),
    "h11": ("mnemo_tui.server.edges",),  # uvicorn's HTTP/1.1 parser: only the protocol subclass of the edges
    "pydantic": ("mnemo_tui.server",),  # request bodies; `mnemo serve` only (test_imports)
    "pydantic_core": ("mnemo_tui.server",),
    "keyring": ("mnemo_tui.state.credentials",),
    "nacl": ("mnemo_tui.state.sealing",),  # imported by the vault commands and demo only (test_imports)
    # the PostgreSQL engine, and libpq's parser of a connection string (dburl); `mnemo recent` never imports it
    "psycopg": ("mnemo_tui.engine.postgres", "mnemo_tui.dburl"),
    "psycopg_pool": ("mnemo_tui.engine.postgres",),
    # `mnemo mcp` and `/mcp` on `mnemo serve` only (the mcp extra); `mnemo recent` never imports it
    "mcp": ("mnemo_tui.agents.sdk", "mnemo_tui.agents.http"),
    "mcp_types": ("mnemo_tui.agents.sdk",),
    "jsonschema": ("mnemo_tui.agents.sdk",),  # a tool call's arguments checked against its schema
}


@dataclass(frozen=True)
class Import:
    """One import statement: who imports what, where, and whether it runs when the module loads."""

    importer: str
    target: str
    line: int
    top_level: bool


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str:
    """The most specific module of the package a dotted name stands for (a submodule, else its package)."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports() -> Iterator[Import]:
    known = modules()
    for importer, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(importer, alias.name, node.lineno, id(node) in top)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: mnemo uses none, but count them right if they appear
                    package = importer if path.name == "__init__.py" else importer.rsplit(".", 1)[0]
                    for _ in range(node.level - 1):
                        package = package.rsplit(".", 1)[0]
                    base = f"{package}.{base}" if base else package
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    target = full if _resolve(full, known) == full else base
                    yield Import(importer, target, node.lineno, id(node) in top)


def internal() -> list[Import]:
    known = modules()
    return [
        Import(i.importer, _resolve(i.target, known), i.line, i.top_level)
        for i in imports()
        if i.target == "mnemo_tui" or i.target.startswith("mnemo_tui.")
    ]


def part_of(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int:
    best, found = -1, -1
    for index, members in enumerate(LAYERS):
        for prefix in members:
            if part_of(module, prefix) and len(prefix) > best:
                best, found = len(prefix), index
    assert found >= 0, f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md"
    return found


def where(i: Import) -> str:
    return f"{i.importer} (line {i.line}) imports {i.target}"


def test_every_module_belongs_to_a_layer() -> None:
    for module in modules():
        layer_of(module)


def test_no_module_imports_a_layer_to_its_right() -> None:
    wrong = [where(i) for i in internal() if layer_of(i.target) > layer_of(i.importer)]
    assert wrong == []


def test_independent_siblings_do_not_know_each_other() -> None:
    wrong = []
    for i in internal():
        for a, b in INDEPENDENT:
            crossing = (part_of(i.importer, a) and part_of(i.target, b)) or (
                part_of(i.importer, b) and part_of(i.target, a)
            )
            allowed = part_of(i.importer, "mnemo_tui.cli") and any(part_of(i.target, s) for s in STARTED_BY_CLI)
            allowed = allowed or ((i.importer, i.target) in MOUNTED and not i.top_level)
            if crossing and not allowed:
                wrong.append(where(i))
    assert wrong == []


def test_the_cli_imports_the_tui_and_the_server_only_inside_the_commands_that_start_them() -> None:
    wrong = [
        where(i)
        for i in internal()
        if part_of(i.importer, "mnemo_tui.cli") and any(part_of(i.target, s) for s in STARTED_BY_CLI) and i.top_level
    ]
    assert wrong == []


@pytest.mark.parametrize("package", sorted(OWNED))
def test_each_third_party_package_is_imported_by_its_one_owner(package: str) -> None:
    owners = OWNED[package]
    wrong = [
        where(i)
        for i in imports()
        if (i.target == package or i.target.startswith(package + "."))
        and not any(part_of(i.importer, owner) for owner in owners)
    ]
    assert wrong == []


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_there_is_no_import_cycle_counting_imports_inside_functions() -> None:
    edges: dict[str, set[str]] = {}
    for i in internal():
        if i.target != i.importer:
            edges.setdefault(i.importer, set()).add(i.target)
    assert cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle_through_a_late_import() -> None:
    # The check above would be worthless if it could not see one: a -> b at the top, b -> a in a function.
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_the_layer_check_sees_an_import_inside_a_function() -> None:
    source = "def f():\n    from mnemo_tui.cli import app\n"
    tree = ast.parse(source)
    nested = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert nested and id(nested[0]) not in {id(n) for n in tree.body}
    assert layer_of("mnemo_tui.cli.app") > layer_of("mnemo_tui.engine.sqlite.store")


def test_the_server_mounts_the_agents_face_only_inside_a_function_and_the_agents_never_import_the_server() -> None:
    crossings = [
        i for i in internal() if part_of(i.importer, "mnemo_tui.server") and part_of(i.target, "mnemo_tui.agents")
    ]
    assert [(i.importer, i.target) for i in crossings] == list(MOUNTED)
    assert not any(i.top_level for i in crossings)
    assert not [
        where(i)
        for i in internal()
        if part_of(i.importer, "mnemo_tui.agents") and part_of(i.target, "mnemo_tui.server")
    ]


def test_the_shared_engine_imports_neither_implementation() -> None:
    wrong = [
        where(i)
        for i in internal()
        if part_of(i.importer, "mnemo_tui.engine")
        and not any(part_of(i.importer, e) for e in ENGINES)
        and any(part_of(i.target, e) for e in ENGINES)
    ]
    assert wrong == []


def test_no_module_of_the_package_is_over_600_lines() -> None:
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


# Inside the TUI the same rule, one level down: its data (no Textual) under the widgets, the widgets (and the
# actions on entries) under the screens, the screens under the app. A widget that wants a dialog posts a
# message; the screen opens it.
TUI_LAYERS: tuple[tuple[str, ...], ...] = (
    ("mnemo_tui.tui.data", "mnemo_tui.tui.session"),
    ("mnemo_tui.tui.plain", "mnemo_tui.tui.messages"),
    ("mnemo_tui.tui.widgets", "mnemo_tui.tui.actions"),
    ("mnemo_tui.tui.screens",),
    ("mnemo_tui.tui.app", "mnemo_tui.tui"),
)
# What may know nothing of Textual: the TUI's data is plain Python, tested without an app.
TEXTUAL_FREE = ("mnemo_tui.tui.data", "mnemo_tui.tui.session")


def tui_layer_of(module: str) -> int:
    best, found = -1, -1
    for index, members in enumerate(TUI_LAYERS):
        for prefix in members:
            if part_of(module, prefix) and len(prefix) > best:
                best, found = len(prefix), index
    assert found >= 0, f"{module} belongs to no layer of the TUI: add it to TUI_LAYERS"
    return found


def test_inside_the_tui_no_module_imports_a_layer_above_it() -> None:
    tui = [i for i in internal() if part_of(i.importer, "mnemo_tui.tui") and part_of(i.target, "mnemo_tui.tui")]
    assert tui, "the TUI's own imports were not found"
    wrong = [where(i) for i in tui if tui_layer_of(i.target) > tui_layer_of(i.importer)]
    assert wrong == []


def test_no_widget_imports_a_screen() -> None:
    # Said on its own as well: the rule above would pass if a reshuffle of TUI_LAYERS put the two together.
    assert tui_layer_of("mnemo_tui.tui.widgets.filter") < tui_layer_of("mnemo_tui.tui.screens.search")
    wrong = [
        where(i)
        for i in internal()
        if (part_of(i.importer, "mnemo_tui.tui.widgets") or part_of(i.importer, "mnemo_tui.tui.actions"))
        and part_of(i.target, "mnemo_tui.tui.screens")
    ]
    assert wrong == []


def test_the_tuis_data_imports_no_textual_and_nothing_that_does() -> None:
    free = [m for m in modules() if any(part_of(m, p) for p in TEXTUAL_FREE)]
    assert "mnemo_tui.tui.data.feed" in free
    wrong = [
        where(i)
        for i in imports()
        if any(part_of(i.importer, p) for p in TEXTUAL_FREE)
        and (
            part_of(i.target, "textual")
            or part_of(i.target, "rich")
            or (part_of(i.target, "mnemo_tui.tui") and not any(part_of(i.target, p) for p in TEXTUAL_FREE))
        )
    ]
    assert wrong == []
