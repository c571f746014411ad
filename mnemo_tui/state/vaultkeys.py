"""Provides where the vault's key pairs live: one per backend, in the OS keyring (service `mnemo`) or a 0600 file.

The keyring entry is service `mnemo`, username `vault-key:<backend>`, where `<backend>` is the
endpoint URL or the embedded store's resolved path (what watermarks are keyed by), and the value
the private key text (`mnemo-key-v1:...`; the public key is derived from it). Without a usable
keyring, `--insecure-storage` keeps the same texts in `vault-keys.json` beside `config.toml`,
mode 0600, written under a new name (`O_CREAT|O_EXCL|O_NOFOLLOW`) and renamed into place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from mnemo_tui.errors import AuthError, LocalStateError, ValidationError
from mnemo_tui.files import EXCLUSIVE, Exposed, read_private_map, write_atomic
from mnemo_tui.state import credentials
from mnemo_tui.state.config import Settings

FILE_NAME = "vault-keys.json"
Where = Literal["keyring", "file"]


def backend_identity(settings: Settings) -> str:
    """The backend a key pair belongs to: the endpoint URL, or the store file's resolved path."""
    if settings.endpoint:
        return settings.endpoint
    if settings.database:
        from mnemo_tui.dburl import database_identity

        return database_identity(settings.database)
    assert settings.store_path is not None
    return str(Path(settings.store_path).resolve())


def username(identity: str) -> str:
    return f"vault-key:{identity}"


def key_file(settings: Settings) -> Path:
    """The `--insecure-storage` file: beside `config.toml`, mode 0600."""
    return Path(settings.config_path).parent / FILE_NAME


def no_keyring_error() -> AuthError:
    """The refusal when there is nowhere to keep the pair (exit 3), naming the fallback."""
    return AuthError(
        "no OS keyring is available to keep the vault key pair; "
        "re-run with --insecure-storage to keep it in a 0600 file (NOT encrypted) beside config.toml"
    )


def write_new_private(path: Path, text: str) -> None:
    """Create `path` holding `text`, mode 0600; refuses a path that exists (a link included).

    Raises:
        ValidationError: the path exists (exit 2).
        LocalStateError: the file cannot be written.
    """
    try:
        fd = os.open(path, EXCLUSIVE, 0o600)
    except FileExistsError:
        raise ValidationError(f"{path} exists already; name a new file") from None
    except OSError as exc:
        raise LocalStateError(f"{path} cannot be created ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise LocalStateError(f"{path} cannot be written ({exc.strerror})") from None


def _read_file(path: Path) -> dict[str, str]:
    try:
        return read_private_map(path)
    except Exposed:
        raise LocalStateError(f"vault key file {path} may be read by others; `chmod 600 {path}` and retry") from None
    except ValueError:
        raise LocalStateError(
            f"vault key file {path} is damaged; restore it from a copy (`mnemo vault import-key`)"
        ) from None
    except OSError as exc:
        raise LocalStateError(f"vault key file {path} cannot be read ({exc.strerror})") from None


def _write_file(path: Path, data: dict[str, str]) -> None:
    try:
        write_atomic(path, json.dumps(data, indent=2, sort_keys=True), 0o600)
    except OSError as exc:
        raise LocalStateError(f"vault key file {path} cannot be written ({exc.strerror})") from None


def load(settings: Settings, *, insecure_storage: bool) -> str | None:
    """The selected backend's private key text, or None when there is no pair yet.

    Raises:
        AuthError: no usable keyring and no `--insecure-storage` (exit 3), or a keyring that refuses.
        LocalStateError: a key file that cannot be read.
    """
    identity = backend_identity(settings)
    path = key_file(settings)
    if insecure_storage:
        return _read_file(path).get(identity)
    # A pair kept with --insecure-storage (announced, with its path, when written) is used without the
    # flag again, as gh reads its file: after the keyring's, or in place of a keyring there is not.
    kept = _read_file(path).get(identity) if path.exists() else None
    backend = credentials.keyring_backend()
    if backend is None:
        if kept is not None:
            return kept
        raise no_keyring_error()
    try:
        text = backend.get_password(credentials.SERVICE, username(identity))
    except Exception as exc:  # noqa: BLE001 - the keyring's own errors are many and backend-specific
        if kept is not None:
            return kept
        raise AuthError(f"the OS keyring did not answer ({type(exc).__name__}); unlock it and retry") from None
    return str(text) if text else kept


def save(settings: Settings, text: str, *, insecure_storage: bool) -> tuple[Where, Path | None]:
    """Keep the private key text for the selected backend (replacing any).

    Returns:
        (`keyring`, None) or (`file`, the file's path): the caller announces where.
    """
    identity = backend_identity(settings)
    if insecure_storage:
        path = key_file(settings)
        data = _read_file(path)
        data[identity] = text
        _write_file(path, data)
        return "file", path
    backend = credentials.keyring_backend()
    if backend is None:
        raise no_keyring_error()
    try:
        backend.set_password(credentials.SERVICE, username(identity), text)
    except Exception as exc:  # noqa: BLE001
        raise AuthError(
            f"the OS keyring refused the vault key pair ({type(exc).__name__}); re-run with --insecure-storage"
        ) from None
    return "keyring", None
