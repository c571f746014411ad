"""Provides the watermark, login, logout, status, demo, config commands (issue 4)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
