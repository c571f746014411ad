"""Provides the embedded engine: the store in one SQLite file."""
