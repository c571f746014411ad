"""Provides the backend-neutral, UI-free uses of a backend that every front end shares: the walk, the catch-up pass,
empty reports and the refusals of acting on entries."""
