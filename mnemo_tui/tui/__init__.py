"""Provides the Textual front end: `MnemoApp` over any `Backend` (the only package that imports textual)."""

from __future__ import annotations

from mnemo_tui.tui.app import MnemoApp

__all__ = ["MnemoApp"]
