"""Provides files written whole: a temporary file created exclusively, never through a link, then renamed in place."""

from __future__ import annotations

import json
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Paths are texts here (os.path): `mnemo recent` reaches this module, and pathlib is dear to import.
    StrPath = str | os.PathLike[str]

# O_EXCL refuses a name that exists, a planted symlink included; O_NOFOLLOW refuses a link even so.
EXCLUSIVE = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)


def temporary_name(path: StrPath) -> str:
    """A fresh, unguessable name beside `path` for the file that will replace it."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")


def make_folder(path: StrPath) -> None:
    """Create the folder `path` is in, and its parents, unless it exists."""
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)


def discard(path: StrPath) -> None:
    """Remove a file, if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_atomic(path: StrPath, text: str, mode: int = 0o600) -> None:
    """Replace `path` with `text` (UTF-8) in one rename: a reader sees the old file or the new one, whole.

    The temporary file is created with `O_EXCL|O_NOFOLLOW` and `mode`, so nothing another user placed
    on its name (a symlink to somewhere they can read) ever receives the content.

    Raises:
        OSError: the folder or the file cannot be written (the old file is left as it was).
    """
    make_folder(path)
    tmp = temporary_name(path)
    fd = os.open(tmp, EXCLUSIVE, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def keep_unsent(state_path: StrPath, text: str) -> str | None:
    """Keep text a person wrote in their editor and that could not be stored, so a failed write loses
    nothing: a private file (0600) in `unsent/` beside the state database; its path, or None when even
    that cannot be written (the caller then says the text is lost)."""
    import time

    folder = os.path.join(os.path.dirname(os.path.abspath(os.fspath(state_path))), "unsent")
    name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.urandom(3).hex()}.md"
    path = os.path.join(folder, name)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, EXCLUSIVE, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text if text.endswith("\n") else text + "\n")
    except OSError:
        return None
    return path


class Exposed(OSError):
    """A private file that others than its owner may read (a key in it is no longer the owner's alone)."""


def read_private_map(path: StrPath) -> dict[str, str]:
    """The `{name: secret}` JSON map of a private file (credentials, vault keys); {} when there is none.

    Opened without following a link, and refused when its mode lets anyone but its owner read it.

    Raises:
        Exposed: the file is readable by its group or others.
        ValueError: the file is not such a map (damaged).
        OSError: the file cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return {}
    with os.fdopen(fd, "r", encoding="utf-8") as handle:
        exposed = stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & 0o077
        try:
            data = json.loads(handle.read())
        except UnicodeDecodeError:
            data = None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ValueError(f"{path} is not a map of names to texts")
    if exposed:
        raise Exposed(f"{path} may be read by others")
    return data


SCISSORS = "# ------------------------ >8 ------------------------"


def editor_command() -> str:
    """The editor a person chose: `VISUAL`, else `EDITOR`, else `vi` (as git does)."""
    return (os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi").strip() or "vi"


def pager_command(configured: str | None = None) -> str:
    """The pager a person chose: `MNEMO_PAGER`, else `configured` (config.toml), else `PAGER`, else `less -FRX`.

    `cat` or an empty value means no pager (the caller decides what that is where it must page).
    """
    return (os.environ.get("MNEMO_PAGER") or configured or os.environ.get("PAGER") or "less -FRX").strip()


def pager_missing(command: str) -> bool:
    """Whether the program a pager command starts cannot be found (`PAGER=/nonexistent`).

    A shell would print its own error and exit, and the output written to it would be lost; git
    prints without the pager instead, and so does mnemo. A first word that sets a variable
    (`LESS=R less`) cannot be judged here and counts as found.
    """
    import shlex
    import shutil

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if not words or "=" in words[0].split("/")[0]:
        return False
    return shutil.which(words[0]) is None


def edit_text(initial: str, help_lines: list[str]) -> str | None:
    """Let a person write text in their editor, as `git commit` does; None when the editor failed.

    The file holds `initial`, then a scissors line and `help_lines` (as `# ...` comments): what is
    above the scissors is the text (a `#` there is content, a markdown heading say), the rest is
    dropped. The file is private (0600, in a private folder) and removed afterwards.
    """
    import shlex
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mnemo-edit-") as folder:
        path = os.path.join(folder, "ENTRY.md")
        body = initial + ("" if initial.endswith("\n") or not initial else "\n")
        comments = "".join(f"# {line}\n" if line else "#\n" for line in help_lines)
        fd = os.open(path, EXCLUSIVE, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(f"{body}\n{SCISSORS}\n# Do not touch the line above: everything below it is ignored.\n{comments}")
        try:
            done = subprocess.run(f"{editor_command()} {shlex.quote(str(path))}", shell=True, check=False)
        except OSError:
            return None
        if done.returncode != 0:
            return None
        with open(path, encoding="utf-8") as written:
            text = written.read()
    kept = text.split(f"\n{SCISSORS}\n", 1)[0] if f"\n{SCISSORS}\n" in text else text.split(SCISSORS, 1)[0]
    return kept.strip("\n")
