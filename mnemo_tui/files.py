"""Provides files written whole: a temporary file created exclusively, never through a link, then renamed in place."""

from __future__ import annotations

import os
from pathlib import Path

# O_EXCL refuses a name that exists, a planted symlink included; O_NOFOLLOW refuses a link even so.
EXCLUSIVE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)


def temporary_name(path: Path) -> Path:
    """A fresh, unguessable name beside `path` for the file that will replace it."""
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")


def write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace `path` with `text` (UTF-8) in one rename: a reader sees the old file or the new one, whole.

    The temporary file is created with `O_EXCL|O_NOFOLLOW` and `mode`, so nothing another user placed
    on its name (a symlink to somewhere they can read) ever receives the content.

    Raises:
        OSError: the folder or the file cannot be written (the old file is left as it was).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    fd = os.open(tmp, EXCLUSIVE, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
