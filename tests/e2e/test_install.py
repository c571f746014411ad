"""The install the README and docs/ci.md give works: a wheel and an sdist built from the repository, the wheel
installed in a fresh virtual environment (from the package registry, at the pins of constraints.txt)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def run(
    *argv: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=480, env=env, cwd=cwd, check=False
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done


def test_a_wheel_built_from_the_repository_installs_in_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", REPO, "-w", dist)  # as the README says
    (wheel,) = dist.glob("mnemo_tui-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names) and "mnemo_tui/tui/mnemo.tcss" in names
    assert not [n for n in names if n.startswith("tests/")]
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=True)
    python = fresh / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", f"{wheel}[all]")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_") and k != "VIRTUAL_ENV"}
    env.update(MNEMO_HOME=str(tmp_path / "home"), NO_COLOR="1")
    mnemo = fresh / "bin" / "mnemo"
    assert run(mnemo, "--version", env=env).stdout.startswith("mnemo ")
    assert run(mnemo, "help", "catchup", env=env).stdout.startswith("Usage: mnemo catchup")
    run(mnemo, "demo", "--entries", "20", env=env)
    line = run(mnemo, "recent", "--limit", "1", "--format", "ndjson", env=env).stdout
    assert json.loads(line)["atom_id"]
    # Every extra's module is there (the README's first command installs what every command needs).
    run(python, "-c", "import uvicorn, mcp, jsonschema, psycopg; import mnemo_tui.agents.sdk", env=env)
    # A missing extra would be named with this very wheel to install again, never a name PyPI lacks.
    again = run(python, "-c", "from mnemo_tui.errors import install_command; print(install_command('mcp'))", env=env)
    assert again.stdout.strip() == f"{python} -m pip install '{wheel}[mcp]'"


def test_the_sdist_carries_the_package_readme_license_and_pins_only(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    venv.create(tools, with_pip=True)
    python = tools / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "hatchling")
    run(python, "-m", "hatchling", "build", "-t", "sdist", "-d", tmp_path / "dist", cwd=REPO)  # builds the cwd
    (sdist,) = (tmp_path / "dist").glob("mnemo_tui-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    outside = sorted(n for n in names if not n.startswith("mnemo_tui/"))
    assert outside == ["LICENSE", "PKG-INFO", "README.md", "constraints.txt", "hatch_build.py", "pyproject.toml"]
    assert not [n for n in names if n.endswith((".gitignore", "README.md")) and n != "README.md"]
