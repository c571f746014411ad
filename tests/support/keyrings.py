"""Provides real keyring backends for tests: one kept in memory, and one that persists to a file for subprocesses."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

ENV_FILE = "TEST_KEYRING_FILE"
BACKEND_PATH = "tests.support.keyrings.FileKeyring"


class MemoryKeyring(KeyringBackend):
    """A keyring backend whose secrets live in a dict (install with `keyring.set_keyring`)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.secrets.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


class FileKeyring(KeyringBackend):
    """The same, persisted to the JSON file named by `TEST_KEYRING_FILE`, so a subprocess can use it.

    Point `PYTHON_KEYRING_BACKEND` at `tests.support.keyrings.FileKeyring` with the repository on `PYTHONPATH`.
    """

    priority = 1  # type: ignore[assignment]

    @property
    def path(self) -> Path:
        return Path(os.environ[ENV_FILE])

    def _load(self) -> dict[str, str]:
        try:
            data: dict[str, str] = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return data

    def _save(self, data: dict[str, str]) -> None:
        self.path.write_text(json.dumps(data))

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\x1f{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}\x1f{username}"] = password
        self._save(data)

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}\x1f{username}", None) is None:
            raise PasswordDeleteError(username)
        self._save(data)


def subprocess_env(keyring_file: Path | None) -> dict[str, str]:
    """Environment for a `mnemo` subprocess: the file keyring at `keyring_file`, or (None) no usable keyring."""
    root = str(Path(__file__).resolve().parents[2])  # where `tests.support.keyrings` imports from
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    if keyring_file is None:
        return {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "PYTHONPATH": path}
    return {"PYTHON_KEYRING_BACKEND": BACKEND_PATH, ENV_FILE: str(keyring_file), "PYTHONPATH": path}
