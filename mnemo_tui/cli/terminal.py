"""Provides what the CLI knows of the terminal: whether a stream is one, its colour and width, and asking the person at it."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from mnemo_tui.errors import ValidationError

if TYPE_CHECKING:
    from typing import IO

FALLBACK_WIDTH = 120
MAX_WIDTH = 10_000  # wider than any screen: a table is never laid out past it


def is_tty(stream: IO[str]) -> bool:
    """Whether a stream is a terminal (False for anything that cannot say)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def color_enabled(stream: IO[str]) -> bool:
    """Colour only on a terminal, never with `NO_COLOR` set (any value) or `TERM=dumb`."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return is_tty(stream)


def width_of(stream: IO[str]) -> int:
    """The width a terminal's table is laid out in: `COLUMNS`, else the terminal's, else 120.

    Only a terminal (or the pager) gets a laid-out table: a pipe gets whole values, never cut to a width.
    """
    import shutil

    # Bounded above too: a mistyped COLUMNS (20 digits) would pad each row past memory, or overflow.
    return min(MAX_WIDTH, max(40, shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns))


def silence_stdout() -> None:
    """Point stdout at /dev/null after the reader went away, so Python does not complain at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def may_ask(yes: bool, command: str) -> None:
    """Refuse (exit 2) a destructive command that would ask first when it cannot: stdin or stderr is no terminal."""
    if not yes and not (is_tty(sys.stdin) and is_tty(sys.stderr)):
        raise ValidationError(f"{command} asks first, and stdin is not a terminal: add --yes to go ahead")


def confirmed(question: str) -> bool:
    """Ask `question [y/N]` on stderr and read the answer from stdin; only y or yes is a yes."""
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
