"""mnemo: a catch-up client for agent memory (queryless newest-first feeds, cursors, watermarks)."""

__version__ = "0.1.0"
