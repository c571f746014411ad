"""mnemo: a catch-up client for agent memory (queryless newest-first feeds, cursors, watermarks)."""

__version__ = "0.1.0"

# `typing.TYPE_CHECKING` without importing typing, which `mnemo recent` does not pay for at start-up
# (docs/architecture.md): every annotation-only import sits under `if TYPE_CHECKING:` with this name,
# which mypy reads as True.
TYPE_CHECKING = False
