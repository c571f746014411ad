"""Every file, module and section the docs, the READMEs and the comments and docstrings of the code name exists, and
no text in the repository names a file outside it (a clone holds nothing else).

A failure lists every stale name with its file and line, so a module moved without its references is found at once.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"node_modules", "__pycache__", "build", "dist"}
TEXT_SUFFIXES = {".py", ".md", ".json", ".toml", ".tcss", ".sh", ".txt", ".yml", ".yaml", ".cfg", ".ini", ""}

# Names of files a clone does not hold: the brief's documents and the folders beside the repository. Spelled in
# pieces so that this file does not name them itself.
OUTSIDE = re.compile(
    r"(?<![\w/.-])(?:" + "|".join(("WIRE", "CLI", "PRODUCT", "ARCHITECTURE", "STYLE")) + r")\.md\b"
    r"|(?<![\w-])" + "shared" + r"/"
    r"|\.\./(?:" + "shared|reference|seed" + r")\b"
    r"|/" + "work" + r"/"
)

# A path with at least one folder (`mnemo_tui/cli/app.py`, `server/bodies.py`, `tests/reference/hosted-openapi.json`),
# optionally `::test_name`. Not one that follows `/`, `~`, `$` or `.` (an absolute path, `~/.config/…`,
# `$MNEMO_HOME/…`, a URL), nor a pattern (`cmd_*.py`, `<name>.py`).
SUFFIXES = r"py|md|json|tcss|sh|toml|txt|yml|yaml"
PATH = re.compile(r"(?<![\w/~$.*{}<>@:%-])((?:[\w-]+/)+[\w.-]*\w\.(?:" + SUFFIXES + r"))(?![\w/*{}-])(?:::(\w+))?")
# A file named alone (`walk.py`, `README.md`): it must exist somewhere in the repository.
BARE = re.compile(r"(?<![\w/~$.*{}<>@:%-])([\w-]*\w\.(?:py|md))(?![\w/*{}(-])")
# A part of a document named by its words: `docs/cli.md, "Credentials"`, `docs/server.md ("Identity")`.
SECTION = re.compile(r'((?:docs/[\w-]+|README)\.md)`?\)?,?:?\s*\(?"([^"\n]{2,80})"')
# A dotted name in the package (`mnemo_tui.cli.output`, `mnemo_tui.tui.MnemoApp`).
DOTTED = re.compile(r"(?<![\w.])(mnemo_tui(?:\.\w+)+)")

# Paths that are not the repository's, named on purpose: a CI job's own checkout of it (docs/ci.md), and where
# a vendored file came from in another project (tests/proof/schemas/README.md).
NOT_OURS = ("mnemo-src/", "check_jsonschema/")


def _files() -> Iterator[Path]:
    for folder, dirs, names in os.walk(ROOT):
        # Hidden folders are local (caches, tools, benchmark stores) but for the CI's own.
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS and not d.endswith(".egg-info") and (not d.startswith(".") or d in {".ci", ".github"})
        )
        for name in sorted(names):
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES and name != ".git":  # a worktree's `.git` file points outside
                yield path


FILES = list(_files())
BASENAMES = {p.name for p in FILES}


def _comments_and_docstrings(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a Python file's comments and docstrings (a string alone as a statement), with their numbers."""
    text = path.read_text(encoding="utf-8")
    docstrings = {
        node.lineno
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.start[0] in docstrings):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if path.suffix == ".py":
        yield from _comments_and_docstrings(path)
    else:
        yield from enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1)


def _named_files() -> list[Path]:
    """The texts whose every named path must exist: every Markdown file (docs/, the READMEs), and the comments and
    docstrings of the package, the tests, the benchmarks and the scripts."""
    return [
        p
        for p in FILES
        if p.suffix == ".md"
        or (
            p.suffix == ".py"
            and any(ROOT / top in p.parents for top in ("mnemo_tui", "tests", "benchmarks", "scripts"))
        )
    ]


def _path_exists(name: str, near: Path) -> bool:
    if name.startswith(NOT_OURS):
        return True
    bases = (ROOT, ROOT / "mnemo_tui", ROOT / "tests", near.parent)
    return any((base / name).exists() for base in bases)


def _module_exists(dotted: str) -> bool:
    """`mnemo_tui.a.b` is a module or package, or a module's name (a class, a function, a constant)."""
    parts = dotted.split(".")
    here = ROOT
    for n, part in enumerate(parts):
        if (here / part).is_dir() and (here / part / "__init__.py").exists():
            here = here / part
            continue
        if (here / f"{part}.py").exists():
            rest = parts[n + 1 :]
            source = (here / f"{part}.py").read_text(encoding="utf-8")
            return not rest or re.search(rf"\b{re.escape(rest[0])}\b", source) is not None
        source = (here / "__init__.py").read_text(encoding="utf-8") if n else ""
        return n > 0 and re.search(rf"\b{re.escape(part)}\b", source) is not None
    return True


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", ""))


def _section_exists(doc: str, words: str) -> bool:
    """The words of a section named (its heading, its bold lead, or a quoted phrase, `…` for what is left out)."""
    text = _flat((ROOT / doc).read_text(encoding="utf-8"))
    return all(_flat(part).strip() in text for part in words.split("…"))


def stale_references() -> list[str]:
    """Every path, file or module named in the docs, the README or the package that does not exist."""
    found: list[str] = []
    for path in _named_files():
        rel = path.relative_to(ROOT)
        for number, line in _lines(path):
            spans: list[tuple[int, int]] = []
            for match in PATH.finditer(line):
                spans.append(match.span(1))
                name, test = match.group(1), match.group(2)
                if not _path_exists(name, path):
                    found.append(f"{rel}:{number}: {name} (no such file)")
                elif test and not any(
                    (base / name).is_file() and f"def {test}" in (base / name).read_text(encoding="utf-8")
                    for base in (ROOT, ROOT / "tests")
                ):
                    found.append(f"{rel}:{number}: {name}::{test} (no such test)")
            for match in BARE.finditer(line):
                if any(a <= match.start(1) < b for a, b in spans):
                    continue
                name = match.group(1)
                if name not in BASENAMES:
                    found.append(f"{rel}:{number}: {name} (no file of that name in the repository)")
            for match in SECTION.finditer(line):
                doc, words = match.groups()
                if (ROOT / doc).is_file() and not _section_exists(doc, words):
                    found.append(f'{rel}:{number}: {doc} "{words}" (no such section or words there)')
            for match in DOTTED.finditer(line):
                name = match.group(1).rstrip(".")
                if not _module_exists(name):
                    found.append(f"{rel}:{number}: {name} (no such module or name)")
    return found


def outside_references() -> list[str]:
    """Every line in the repository that names a file outside it."""
    here = Path(__file__).resolve()
    found: list[str] = []
    for path in FILES:
        if path == here:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            for match in OUTSIDE.finditer(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    return found


def test_every_file_and_module_the_docs_and_the_package_name_exists() -> None:
    stale = stale_references()
    assert not stale, "stale names (update each reference, or the name):\n" + "\n".join(stale)


def test_nothing_in_the_repository_names_a_file_outside_it() -> None:
    outside = outside_references()
    assert not outside, "files a clone does not hold (state the contract in docs/ and cite that):\n" + "\n".join(
        outside
    )


def test_the_checks_see_a_bogus_reference() -> None:
    # The patterns themselves: a moved module, a vanished test file and an outside document are each caught.
    line = "see `mnemo_tui/cli/nowhere.py`, tests/cli/test_nothing.py, gone.py and mnemo_tui.cli.nowhere"
    assert [m.group(1) for m in PATH.finditer(line)] == ["mnemo_tui/cli/nowhere.py", "tests/cli/test_nothing.py"]
    assert not _path_exists("mnemo_tui/cli/nowhere.py", ROOT / "docs" / "cli.md")
    assert _path_exists("cli/app.py", ROOT / "docs" / "cli.md")
    assert [m.group(1) for m in BARE.finditer("a walk.py and gone.py")] == ["walk.py", "gone.py"]
    assert "gone.py" not in BASENAMES
    assert _module_exists("mnemo_tui.cli.app") and _module_exists("mnemo_tui.cli.app.COMMANDS")
    assert not _module_exists("mnemo_tui.cli.nowhere")
    assert OUTSIDE.search("as " + "WIRE" + ".md says") and OUTSIDE.search("../" + "shared" + "/docs")
    assert not OUTSIDE.search("docs/server.md and a shared room")
    assert [m.groups() for m in SECTION.finditer('(docs/cli.md, "Credentials") and docs/server.md ("Nowhere")')] == [
        ("docs/cli.md", "Credentials"),
        ("docs/server.md", "Nowhere"),
    ]
    assert _section_exists("docs/cli.md", "Credentials") and not _section_exists("docs/server.md", "Nowhere")
