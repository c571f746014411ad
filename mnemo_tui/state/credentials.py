"""Provides API keys per endpoint: `MNEMO_API_KEY`, the OS keyring (service `mnemo`), or an announced 0600 file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from mnemo_tui.errors import AuthError, LocalStateError
from mnemo_tui.files import Exposed, read_private_map, write_atomic
from mnemo_tui.state.config import Settings, endpoint_aliases

SERVICE = "mnemo"
FILE_NAME = "credentials.json"
KeySource = Literal["env", "keyring", "file", "none"]


def credentials_file(settings: Settings) -> Path:
    """The plain-file fallback (`--insecure-storage`): beside `config.toml`, mode 0600."""
    return Path(settings.config_path).parent / FILE_NAME


def _keyring() -> Any | None:
    """The usable keyring backend, or None when there is none (`fail`, `null`, or an empty chain).

    keyring is imported here, lazily: only commands that need a key pay for it.
    """
    try:
        import keyring
        from keyring.backends import chainer, fail, null
    except Exception:  # noqa: BLE001 - a broken keyring install means no keyring, not a crash
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # noqa: BLE001 - e.g. PYTHON_KEYRING_BACKEND naming a class that does not load
        return None
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return None
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return None
    return backend


def keyring_backend() -> Any | None:
    """The usable keyring backend (for the vault's key pairs, kept under the same service), or None."""
    return _keyring()


def keyring_available() -> bool:
    """Whether a usable OS keyring backend exists."""
    return _keyring() is not None


def _read_file(path: Path) -> dict[str, str]:
    try:
        return read_private_map(path)
    except Exposed:
        raise LocalStateError(f"credentials file {path} may be read by others; `chmod 600 {path}` and retry") from None
    except ValueError:
        raise LocalStateError(
            f"credentials file {path} is damaged; delete it and run `mnemo login --insecure-storage` again"
        ) from None
    except OSError as exc:
        raise LocalStateError(f"credentials file {path} cannot be read ({exc.strerror}); fix its permissions") from None


def _write_file(path: Path, data: dict[str, str]) -> None:
    try:
        write_atomic(path, json.dumps(data, indent=2, sort_keys=True), 0o600)
    except OSError as exc:
        raise LocalStateError(f"credentials file {path} cannot be written ({exc.strerror})") from None


def lookup_key(settings: Settings) -> tuple[str | None, KeySource]:
    """The API key for the selected endpoint and where it came from.

    Order: `MNEMO_API_KEY` (settings.api_key), the `--insecure-storage` file, the OS keyring. The file
    comes before the keyring because a key is in it only by an explicit `login --insecure-storage`
    (a later `login` into the keyring takes it out: `store_key`), and because reading it costs no
    keyring import and backend discovery (about 0.2 s of a remote `recent`, docs/performance.md).

    Returns:
        (key, source) with source one of `env`, `keyring`, `file`, `none` (then key is None).

    Raises:
        LocalStateError: a credentials file that exists but cannot be read.
    """
    if settings.api_key:
        return settings.api_key, "env"
    endpoint = settings.endpoint
    if not endpoint:
        return None, "none"
    names = [endpoint, *endpoint_aliases(endpoint)]
    stored = _read_file(credentials_file(settings))
    for name in names:
        key = stored.get(name)
        if key and key.strip():
            return key.strip(), "file"
    backend = _keyring()
    for name in names:
        if backend is not None:
            try:
                key = backend.get_password(SERVICE, name)
            except Exception:  # noqa: BLE001 - a locked or failing keyring reads as no key there
                key = None
            if key and str(key).strip():
                return str(key).strip(), "keyring"
    return None, "none"


def key_source(settings: Settings) -> KeySource:
    """Only where the key would come from (for `status`); never the key."""
    return lookup_key(settings)[1]


def no_keyring_error() -> AuthError:
    """The refusal when there is nowhere to keep a key (exit 3), naming both ways out."""
    return AuthError(
        "no OS keyring is available to keep the key. Set MNEMO_API_KEY in the environment instead, "
        "or re-run with --insecure-storage to keep it in a 0600 file"
    )


def store_key(settings: Settings, key: str, *, insecure_storage: bool = False) -> tuple[KeySource, Path | None]:
    """Keep a key for the selected endpoint: the OS keyring, or the 0600 file when asked explicitly.

    Returns:
        (where, path): `keyring` and None, or `file` and the file's path (the caller announces it).

    Raises:
        AuthError: no usable keyring and no `--insecure-storage` (exit 3), naming both ways out.
        LocalStateError: the file cannot be written.
    """
    endpoint = settings.endpoint
    assert endpoint is not None
    if insecure_storage:
        path = credentials_file(settings)
        data = _read_file(path)
        data[endpoint] = key
        _write_file(path, data)
        return "file", path
    backend = _keyring()
    if backend is None:
        raise no_keyring_error()
    try:
        backend.set_password(SERVICE, endpoint, key)
    except Exception as exc:  # noqa: BLE001 - the keyring's own errors are many and backend-specific
        raise AuthError(
            f"the OS keyring refused the key ({type(exc).__name__}); set MNEMO_API_KEY instead, "
            "or re-run with --insecure-storage"
        ) from None
    _drop_from_file(settings, endpoint)  # the file is read first: an older key kept there must not win
    return "keyring", None


def _drop_from_file(settings: Settings, endpoint: str) -> bool:
    """Take the endpoint's key (under any of its spellings) out of the credentials file; whether one was there."""
    path = credentials_file(settings)
    data = _read_file(path)
    names = [endpoint, *endpoint_aliases(endpoint)]
    if not any(name in data for name in names):
        return False
    for name in names:
        data.pop(name, None)
    if data:
        _write_file(path, data)
        return True
    try:
        path.unlink()
    except OSError as exc:
        raise LocalStateError(f"credentials file {path} cannot be removed ({exc.strerror})") from None
    return True


def forget_key(settings: Settings) -> list[str]:
    """Remove the endpoint's key from the keyring and the file; returns where one was removed."""
    endpoint = settings.endpoint
    assert endpoint is not None
    removed: list[str] = []
    names = [endpoint, *endpoint_aliases(endpoint)]
    backend = _keyring()
    if backend is not None:
        for name in names:
            try:
                if backend.get_password(SERVICE, name):
                    backend.delete_password(SERVICE, name)
                    if "keyring" not in removed:
                        removed.append("keyring")
            except Exception:  # noqa: BLE001 - nothing to delete, or a keyring that cannot; the file still goes
                pass
    if _drop_from_file(settings, endpoint):
        removed.append("file")
    return removed
