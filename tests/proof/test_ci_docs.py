"""The CI jobs of docs/ci.md: valid for GitHub Actions and GitLab CI (their vendored JSON schemas), and their
shell steps run on a temporary embedded store, so the recipes cannot rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.ci_reports import SCHEMAS, junit_cases, workflow_commands
from tests.support.cli import MNEMO

DOC = Path(__file__).parents[2] / "docs" / "ci.md"
# The install steps are the runner's (tests/e2e/test_install.py installs a wheel built from the repository).
INSTALL = re.compile(r"^(pip install |git clone .* mnemo-src$)")


def yaml_blocks() -> list[dict[str, Any]]:
    """Every whole YAML document of docs/ci.md (the step fragments, lists, are left out)."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    documents = [yaml.safe_load(b) for b in blocks]
    return [d for d in documents if isinstance(d, dict)]


def github_job() -> dict[str, Any]:
    [workflow] = [d for d in yaml_blocks() if "jobs" in d]
    # YAML 1.1 reads the key `on` as true; GitHub reads it as `on`.
    workflow["on"] = workflow.pop(True)
    return workflow


def gitlab_job() -> dict[str, Any]:
    [pipeline] = [d for d in yaml_blocks() if "stages" in d]
    return pipeline


def validator(name: str) -> jsonschema.Draft7Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    return jsonschema.Draft7Validator(schema)


def test_the_github_workflow_validates_against_its_schema() -> None:
    workflow = github_job()
    assert not list(validator("github-workflows.json").iter_errors(workflow))
    steps = workflow["jobs"]["catch-up"]["steps"]
    runs = " ".join(s.get("run", "") for s in steps)
    assert "mnemo catchup" in runs and "mnemo check --report github" in runs and "--report junit:" in runs
    assert any(s.get("uses", "").startswith("actions/cache@") for s in steps)
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps)


def test_the_gitlab_job_validates_against_its_schema() -> None:
    pipeline = gitlab_job()
    assert not list(validator("gitlab-ci.json").iter_errors(pipeline))
    job = pipeline["mnemo-catch-up"]
    assert job["cache"]["paths"] == [".mnemo-state/"] and job["variables"]["MNEMO_STATE"].startswith("$CI_PROJECT_DIR")
    assert job["artifacts"]["reports"]["junit"] == "reports/*.xml" and job["artifacts"]["when"] == "always"


def test_the_schemas_would_catch_a_broken_job() -> None:
    workflow = github_job()
    workflow["jobs"]["catch-up"]["steps"][0]["with"] = "not a mapping"
    assert list(validator("github-workflows.json").iter_errors(workflow))
    pipeline = gitlab_job()
    pipeline["mnemo-catch-up"]["artifacts"]["when"] = "sometimes"
    assert list(validator("gitlab-ci.json").iter_errors(pipeline))


def run_bash(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def base_env(isolated_home: Path, workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MNEMO_", "GITHUB_", "CI_"))}
    env["PATH"] = f"{Path(MNEMO).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MNEMO_HOME"] = str(isolated_home)
    env["MNEMO_STORE"] = str(workspace / "store.db")  # the embedded store instead of an endpoint (docs/ci.md)
    env["NO_COLOR"] = "1"
    return env


def test_the_github_job_runs_its_steps_on_a_temporary_store(isolated_home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    summary = tmp_path / "summary.md"
    context = {"github.workspace": str(workspace), "github.run_id": "4242", "github.ref_name": "main"}

    def expand(value: str) -> str | None:
        """`${{ github.x }}` as the runner fills it in; None for what a test has not got (vars, secrets)."""
        for name, known in context.items():
            value = value.replace("${{ " + name + " }}", known)
        return None if "${{" in value else value

    job = github_job()["jobs"]["catch-up"]
    env = base_env(isolated_home, workspace) | {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    for key, value in job["env"].items():
        expanded = expand(str(value))
        if expanded is not None:
            env[key] = expanded
    assert "MNEMO_ENDPOINT" not in env and env["MNEMO_STATE"] == f"{workspace}/.mnemo-state/state.db"
    ran = []
    for step in job["steps"]:
        script = step.get("run")
        if script is None or INSTALL.match(script):
            continue  # `uses:` steps and the install are the runner's
        command = expand(script)
        assert command is not None, f"unknown expression in {script!r}"
        result = run_bash(command, env, workspace)
        assert result.returncode == 0, f"{step['name']}: {result.stdout}{result.stderr}"
        assert not [c for c in workflow_commands(result.stderr) if c.name == "error"], result.stderr
        ran.append(step["name"])
    assert len(ran) == 5
    produced = (workspace / "produced.txt").read_text().split()
    caught = [json.loads(line)["atom_id"] for line in (workspace / "caught.ndjson").read_text().splitlines()]
    assert len(produced) == 4 and sorted(produced) == sorted(caught)
    assert {kind for kind, _ in junit_cases(workspace / "reports" / "verify.xml").values()} == {"passed"}
    assert {kind for kind, _ in junit_cases(workspace / "reports" / "check.xml").values()} == {"passed"}
    assert summary.read_text().count("### mnemo ") == 2 and "### mnemo check: PASS" in summary.read_text()


@pytest.mark.parametrize("runs", [1, 2])
def test_the_gitlab_job_runs_its_script_on_a_temporary_store(isolated_home: Path, tmp_path: Path, runs: int) -> None:
    job = gitlab_job()["mnemo-catch-up"]
    cache = tmp_path / "cache"
    for run in range(1, runs + 1):
        workspace = tmp_path / f"run{run}"
        workspace.mkdir()
        if cache.exists():  # the runner restores the branch's cache into the project folder
            subprocess.run(["cp", "-a", f"{cache}/.", str(workspace)], check=True)
        env = base_env(isolated_home, tmp_path) | {
            "CI_PROJECT_DIR": str(workspace),
            "CI_PIPELINE_ID": str(run),
            "CI_COMMIT_REF_SLUG": "main",
        }
        exports = "".join(f'export {k}="{v}"\n' for k, v in job["variables"].items())
        lines = [line for line in [*job["before_script"], *job["script"]] if not INSTALL.match(line)]
        result = run_bash(exports + "\n".join(lines), env, workspace)
        assert result.returncode == 0, result.stdout + result.stderr
        assert (workspace / ".mnemo-state" / "state.db").exists()
        produced = (workspace / "produced.txt").read_text().split()
        caught = [json.loads(line)["atom_id"] for line in (workspace / "caught.ndjson").read_text().splitlines()]
        # The watermark came through the cache: each run delivers only what it produced.
        assert sorted(caught) == sorted(produced) and len(produced) == 2
        for report in ("verify.xml", "check.xml"):
            assert {kind for kind, _ in junit_cases(workspace / "reports" / report).values()} == {"passed"}
        subprocess.run(["rm", "-rf", str(cache)], check=True)
        cache.mkdir()
        subprocess.run(["cp", "-a", str(workspace / ".mnemo-state"), str(cache)], check=True)
