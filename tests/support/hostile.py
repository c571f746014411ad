"""Hostile text for the tests of mnemo_tui/sanitize.py's use: terminal attacks a room member can store (no tests here)."""

from __future__ import annotations

OSC_TITLE = "\x1b]0;PWNED\x07"  # OSC 0: retitles the terminal
OSC_CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: writes the reader's clipboard
ERASE_LINE = "\x1b[2K"  # CSI 2K
RED = "\x1b[31m"  # SGR
BELL = "\x07"
BACKSPACE = "\x08"
RLO = "\u202e"  # right-to-left override

ATTACKS = (OSC_TITLE, OSC_CLIPBOARD, ERASE_LINE, RED, BELL, BACKSPACE, RLO)
# One of each, around words, as a stored text.
HOSTILE = "note" + "".join(f" {a}x" for a in ATTACKS) + " end"
# The same as a person's terminal shows it (mnemo_tui/sanitize.py's `line`).
HOSTILE_SHOWN = "note \\x1b]0;PWNED\\x07x \\x1b]52;c;cHduZWQ=\\x07x \\x1b[2Kx \\x1b[31mx \\x07x \\x08x <U+202E>x end"
# Room names that are Textual markup: a crash and a clickable action, unless shown as plain text.
MARKUP_ROOMS = ("[/]", "[@click=app.quit]x[/]")
# Every control character (C0, DEL, C1) and bidi control: none may reach a terminal raw.
RAW = frozenset(
    [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
    + ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
)


def raw_controls(output: str, *, allow: str = "\n") -> set[str]:
    """The control and bidi characters in `output` (a newline allowed between lines)."""
    return {c for c in output if c in RAW and c not in allow}
