"""Provides the TUI's data layer: feed windows, live tracking, counts and activity, with no Textual in it."""
