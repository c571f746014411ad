"""`mnemo demo` leaves a secret `mnemo vault get` unseals on the same machine, with a keyring or without one."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from tests.support.keyrings import subprocess_env


def test_demo_without_a_keyring_keeps_its_pair_in_the_announced_key_file(cli: Any, isolated_home: Path) -> None:
    env = subprocess_env(None)  # no keyring backend at all (a headless machine, a CI runner)
    made = cli("demo", "--entries", "10", env=env)
    assert made.code == 0, made.stderr
    assert "sealed to your key pair: mnemo vault get staging-deploy-token" in made.stdout
    kept = isolated_home / "vault-keys.json"
    # Announced, with its path and what it means: a key is never written anywhere silently.
    assert f"in {kept} (mode 0600, NOT encrypted" in made.stderr
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    got = cli("vault", "get", "staging-deploy-token", env=env)
    assert got.code == 0 and got.stdout.startswith("demo-"), got.stderr
    # Another demo into the same store uses the same pair: the first secret stays readable.
    again = cli("demo", "--entries", "10", "--force", env=env)
    assert again.code == 0 and "Created vault key pair" not in again.stderr
    assert cli("vault", "get", "staging-deploy-token", env=env).stdout == got.stdout


def test_demo_with_a_keyring_keeps_its_pair_there_and_writes_no_file(run_cli: Any, isolated_home: Path) -> None:
    made = run_cli("demo", "--entries", "10")
    assert made.code == 0 and "the OS keyring (service 'mnemo')" in made.stderr
    assert not (isolated_home / "vault-keys.json").exists()
    got = run_cli("vault", "get", "staging-deploy-token")
    assert got.code == 0 and got.stdout.startswith("demo-"), got.stderr
