"""Rewrite test files' imports from the old test layout to the new one (issue 53).

The shared helpers moved from bare modules at the root of `tests/` (imported through
`pythonpath = ["tests"]`) into the `tests.support` package, what tests took from `conftest.py` moved
into support modules, and some test modules moved or were renamed. A test file written against the
old layout (on a branch merged after the move) gets its imports rewritten by:

    python scripts/tests_layout_rewrite.py tests/some/test_file.py ...   # rewrite in place
    python scripts/tests_layout_rewrite.py --check tests                  # list what would change

then `ruff check --fix` and `ruff format` sort the rewritten imports. Only import lines and the
`old_module.` prefix of a module imported whole are touched; the tests themselves are not.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# Old bare module name -> its new dotted module.
MODULES = {
    "broken_backends": "tests.support.broken_backends",
    "ci_report_helpers": "tests.support.ci_reports",
    "follow_helpers": "tests.support.follow",
    "hostile_helpers": "tests.support.hostile",
    "keyring_helpers": "tests.support.keyrings",
    "mcp_helpers": "tests.support.mcp_client",
    "pg_helpers": "tests.support.pg",
    "reliability_helpers": "tests.support.reliability",
    "serve_process": "tests.support.serve",
    "sse_servers": "tests.backends.sse_servers",  # used by one test only: beside it
    "tui_helpers": "tests.support.tui",
    "walk_helpers": "tests.support.walk",
    "wire_servers": "tests.support.wire",
    "server.recorder": "tests.server.recorder",
}

# Names tests imported `from conftest` -> the module that holds them now.
CONFTEST_NAMES = {
    "CliResult": "tests.support.cli",
    "MNEMO": "tests.support.cli",
    "on_terminal": "tests.support.cli",
    "Target": "tests.support.targets",
    "BACKENDS": "tests.support.targets",
}

# Test modules that moved or were renamed (old dotted -> new dotted), for tests importing from tests.
TEST_MODULES: dict[str, str] = {
    "tests.engine.test_sanitize": "tests.test_sanitize",
    "tests.engine.test_timefmt": "tests.test_timefmt",
    "tests.catchup.test_walk": "tests.test_walk",
    "tests.catchup.test_catchup": "tests.test_catchup",
    "tests.catchup.test_empty_reports": "tests.test_empty_reports",
    "tests.catchup.test_removals": "tests.test_removals",
    "tests.catchup.test_removals_pages": "tests.test_removals_pages",
    "tests.catchup.test_removals_processes": "tests.reliability.test_removals_processes",
    "tests.catchup.test_removals_pages_processes": "tests.reliability.test_removals_pages_processes",
    "tests.server.test_follow_fixes": "tests.server.test_follow_edges",
    "tests.cli.test_audit_cli": "tests.cli.test_usage_and_messages",
    "tests.cli.test_conventions": "tests.cli.test_unix_habits",
    "tests.tui.test_tui_tmux": "tests.e2e.test_tui_tmux",
    "tests.cli.test_install": "tests.e2e.test_install",
    "tests.cli.test_readme": "tests.e2e.test_readme",
    "tests.cli.test_progress": "tests.e2e.test_progress",
    "tests.cli.test_cli_manners": "tests.e2e.test_terminal_manners",
    "tests.cli.test_daily_driver": "tests.e2e.test_pager_pipes_and_signals",
    "tests.server.test_server_cli": "tests.e2e.test_serve_process",
}

# Names that moved out of a test module into a support module: (old dotted module, name) -> new module.
MOVED_NAMES = {
    ("tests.cli.test_cli_manners", "in_terminal"): "tests.support.cli",
    ("tests.cli.test_cli_manners", "recorder"): "tests.support.cli",
    ("tests.cli.test_cli_manners", "fill"): "tests.support.cli",
    ("security.test_hostile_data", "RawMcp"): "tests.security.raw_mcp",
    ("tests.security.test_hostile_data", "RawMcp"): "tests.security.raw_mcp",
}

FROM_RE = re.compile(r"^(?P<indent>[ \t]*)from (?P<module>[\w.]+) import (?P<names>.*)$")
IMPORT_RE = re.compile(r"^(?P<indent>[ \t]*)import (?P<module>[\w.]+)(?P<alias> as \w+)?[ \t]*$")


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.strip().strip("()").split(",") if n.strip()]


def rewrite(source: str) -> str:
    """The source with its imports of the old layout rewritten to the new one."""
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    whole: dict[str, str] = {}  # old module imported whole -> the name it is used by now
    for line in lines:
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        match = FROM_RE.match(body)
        if match and match["module"] == "server" and _names(match["names"]) == ["recorder"]:
            out.append(f"{match['indent']}from tests.server import recorder{end}")
            continue
        if match and match["module"] == "conftest":
            names = _names(match["names"])
            if "(" in match["names"] and ")" not in match["names"]:
                raise SystemExit(f"a multi-line `from conftest import (` is not handled: {body!r}")
            by_module: dict[str, list[str]] = {}
            for name in names:
                module = CONFTEST_NAMES.get(name.split(" as ")[0].strip())
                if module is None:
                    raise SystemExit(f"`{name}` from conftest has no new home: make it a fixture or a support module")
                by_module.setdefault(module, []).append(name)
            for module, taken in sorted(by_module.items()):
                out.append(f"{match['indent']}from {module} import {', '.join(taken)}{end}")
            continue
        if match and any(module == match["module"] for module, _ in MOVED_NAMES):
            by_module = {}
            for name in _names(match["names"]):
                module = MOVED_NAMES.get((match["module"], name.split(" as ")[0].strip()))
                by_module.setdefault(module or TEST_MODULES.get(match["module"], match["module"]), []).append(name)
            for module, taken in sorted(by_module.items()):
                out.append(f"{match['indent']}from {module} import {', '.join(taken)}{end}")
            continue
        if match and (match["module"] in MODULES or match["module"] in TEST_MODULES):
            new = MODULES.get(match["module"]) or TEST_MODULES[match["module"]]
            out.append(f"{match['indent']}from {new} import {match['names']}{end}")
            continue
        match = IMPORT_RE.match(body)
        if match and match["module"] in MODULES:
            new = MODULES[match["module"]]
            package, _, short = new.rpartition(".")
            alias = (match["alias"] or "").removeprefix(" as ")
            if alias:
                out.append(f"{match['indent']}from {package} import {short} as {alias}{end}")
            elif re.search(rf"(?:def|class|for|as|import)\s+{short}\b|\b{short}\s*(?::|=(?!=))", source):
                # The short name is taken in this file: keep the old name for the module.
                out.append(f"{match['indent']}from {package} import {short} as {match['module']}{end}")
            else:
                out.append(f"{match['indent']}from {package} import {short}{end}")
                whole[match["module"]] = short
            continue
        out.append(line)
    text = "".join(out)
    for old, short in whole.items():
        text = re.sub(rf"\b{old}\.", f"{short}.", text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="test files or folders")
    parser.add_argument("--check", action="store_true", help="list the files that would change; write nothing")
    args = parser.parse_args(argv)
    files = [f for p in args.paths for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p])]
    changed = 0
    for file in files:
        if "support" in file.parts and file.name == "__init__.py":
            continue
        before = file.read_text(encoding="utf-8")
        after = rewrite(before)
        if after != before:
            changed += 1
            print(file)
            if not args.check:
                file.write_text(after, encoding="utf-8")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
