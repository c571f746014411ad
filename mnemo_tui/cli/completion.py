"""Provides the values shell completion offers for `--scope`, `--format` and `--consumer`, from local state only.

Completion runs on every TAB: it never contacts an endpoint or a PostgreSQL server, never asks for
or reads a key, and creates no file. Scopes come from the embedded store when it is the one selected
and exists (its domains, the names and addresses of its rooms), and, for any backend, from the
scopes of the watermarks in the state database; consumers from those watermarks. Anything that
cannot be read offers nothing rather than an error in the middle of a command line.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

# At run time: Typer reads the completion functions' annotations to know what to pass them.
import typer

if TYPE_CHECKING:
    from mnemo_tui.state.config import Settings

ENTRY_FORMATS = ("table", "json", "ndjson")
TABLE_FORMATS = ("table", "json")


def entry_formats(incomplete: str) -> list[str]:
    """`--format` of a command that lists entries."""
    return [f for f in ENTRY_FORMATS if f.startswith(incomplete)]


def table_formats(incomplete: str) -> list[str]:
    """`--format` of a command whose output is no list of entries."""
    return [f for f in TABLE_FORMATS if f.startswith(incomplete)]


def scopes(ctx: typer.Context, incomplete: str) -> list[str]:
    """`--scope`: own domains, room names and `xroom:` addresses, and the scopes watermarks were kept for."""
    settings = _settings(ctx)
    if settings is None:
        return []
    found: set[str] = set()
    if not (settings.endpoint or settings.database) and settings.store_path is not None:
        found.update(_store_scopes(Path(settings.store_path), settings.principal))
    # Watermarks are keyed by the backend's identity: the endpoint URL, or the store file's path.
    identity = settings.endpoint or (None if settings.database else str(settings.store_path))
    found.update(s for s in _state_column(Path(settings.state_path), "scope", identity) if s)
    return sorted(s for s in found if s.startswith(incomplete))


def consumers(ctx: typer.Context, incomplete: str) -> list[str]:
    """`--consumer`: the consumers that keep a watermark in the state database, and the configured one."""
    settings = _settings(ctx)
    if settings is None:
        return []
    found = {*_state_column(Path(settings.state_path), "consumer"), settings.consumer}
    return sorted(c for c in found if c.startswith(incomplete))


def _settings(ctx: typer.Context) -> Settings | None:
    """The settings the root options on the command line select (config.toml and environment too)."""
    from mnemo_tui.errors import MnemoError
    from mnemo_tui.state.config import resolve

    root = ctx.find_root().params
    try:
        return resolve(
            profile=root.get("profile"),
            store=root.get("store"),
            endpoint=root.get("endpoint"),
            database=root.get("database"),
        )
    except (MnemoError, OSError, ValueError):
        return None


def _read_only(path: Path) -> sqlite3.Connection | None:
    """The database at `path` opened read-only (no file is created, nothing is written), or None."""
    if not path.is_file():
        return None
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0.2)
    except sqlite3.Error:
        return None


def _state_column(path: Path, column: str, backend: str | None = None) -> list[str]:
    """The values of one column of the watermarks (of one backend, when named)."""
    db = _read_only(path)
    if db is None:
        return []
    where, args = ("WHERE backend = ?", (backend,)) if backend is not None else ("", ())
    try:
        return [str(r[0]) for r in db.execute(f"SELECT DISTINCT {column} FROM watermarks {where}", args)]
    except sqlite3.Error:
        return []
    finally:
        db.close()


def _store_scopes(path: Path, principal: str) -> list[str]:
    """The embedded store's own domains and the reader's rooms (by name and by address)."""
    if not path.is_file():
        return []
    from mnemo_tui.backends.local import LocalBackend
    from mnemo_tui.errors import MnemoError

    try:
        backend = LocalBackend.open(path, principal)
    except (MnemoError, sqlite3.Error, OSError):
        return []
    try:
        rooms = backend.rooms()
        return [*backend.domains(), *(r.name for r in rooms), *(r.address for r in rooms)]
    except (MnemoError, sqlite3.Error):
        return []
    finally:
        backend.close()
