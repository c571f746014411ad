"""Provides `as_error`: the one translation of what a read raised into the project's error, for every part of the TUI."""

from __future__ import annotations

from mnemo_tui.errors import MnemoError


def as_error(exc: BaseException) -> MnemoError:
    """What a read raised, as the project's error: an unexpected exception (a bug) is an internal error."""
    if isinstance(exc, MnemoError):
        return exc
    return MnemoError(f"internal error: {type(exc).__name__}: {exc}")
