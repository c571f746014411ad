"""One way to declare a value (docs/architecture.md, "Values: a field is declared once"): `model.Value`, held by CI.

No module of the package names `dataclasses`, `SimpleNamespace`, `namedtuple` or `NamedTuple`, in an import or
in its code, but the one named tuple of the package: `Entry`, in `values/model.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mnemo_tui"
# The other ways to declare a value, as a module or a name.
BANNED = {"dataclasses", "dataclass", "SimpleNamespace", "namedtuple", "NamedTuple"}
# `Entry`'s fields: a named tuple, built per row with `Entry._make(row)` (docs/architecture.md says why).
ALLOWED = {("values/model.py", "NamedTuple")}


def _names(tree: ast.AST) -> list[tuple[int, str]]:
    """Each banned name a module's code uses: imported (`import dataclasses`, `from types import ...`), named or
    reached as an attribute (`types.SimpleNamespace`, `typing.NamedTuple`)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, part) for alias in node.names for part in alias.name.split(".")]
        elif isinstance(node, ast.ImportFrom):
            found += [(node.lineno, part) for part in (node.module or "").split(".")]
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
    return [(line, name) for line, name in found if name in BANNED]


def _offences(path: Path) -> list[str]:
    where = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{where}:{line}: {name}" for line, name in _names(tree) if (where, name) not in ALLOWED]


def test_every_value_of_the_package_is_a_model_value() -> None:
    offences = [o for path in sorted(PACKAGE.rglob("*.py")) for o in _offences(path)]
    assert not offences, "declare values with `model.Value` (docs/architecture.md):\n" + "\n".join(offences)


def test_the_one_named_tuple_is_entrys_fields() -> None:
    source = (PACKAGE / "values" / "model.py").read_text(encoding="utf-8")
    lines = source.splitlines()
    uses = [lines[line - 1].strip() for line, name in _names(ast.parse(source)) if name == "NamedTuple"]
    assert sorted(uses) == sorted(
        [
            "from typing import TYPE_CHECKING, NamedTuple, dataclass_transform",
            next(line.strip() for line in lines if line.startswith("_EntryFields = NamedTuple(")),
        ]
    ), uses
    assert "class Entry(_EntryFields):" in lines


def test_the_check_sees_each_way() -> None:
    """A check that could not see an offence would prove nothing: each form of each way is found."""
    sources = {
        "import dataclasses": "dataclasses",
        "from dataclasses import field": "dataclasses",
        "from types import SimpleNamespace": "SimpleNamespace",
        "import types\nx = types.SimpleNamespace(a=1)": "SimpleNamespace",
        "import collections\nP = collections.namedtuple('P', 'a')": "namedtuple",
        "import typing\nclass P(typing.NamedTuple):\n    a: int": "NamedTuple",
        "def f():\n    from dataclasses import dataclass\n    return dataclass": "dataclass",
    }
    for source, name in sources.items():
        assert name in {found for _, found in _names(ast.parse(source))}, source
    assert not _names(ast.parse('"""Not dataclasses: a Value."""\nfrom typing import dataclass_transform'))
