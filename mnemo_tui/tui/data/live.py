"""Provides live tracking for the TUI: the walk layer's `LiveTracker` (shared with `mnemo recent --follow`)."""

from __future__ import annotations

from mnemo_tui.walk import LIVE_PAGES, LiveBatch, LiveTracker, Probe

__all__ = ["LIVE_PAGES", "LiveBatch", "LiveTracker", "Probe"]
