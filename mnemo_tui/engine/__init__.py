"""Provides the embedded SQLite engine (imports nothing but the standard library and the model)."""

from mnemo_tui.engine.store import Store

__all__ = ["Store"]
