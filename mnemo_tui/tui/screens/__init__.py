"""Provides the TUI's screens: the feed, search, and help."""
