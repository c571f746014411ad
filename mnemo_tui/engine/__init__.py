"""Provides the engines: the `Engine` interface, and `Store`, the embedded SQLite engine (standard library only)."""
