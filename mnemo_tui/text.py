"""Provides the one sanitizer of text from a store or an endpoint before a person's terminal shows it.

Stored text is hostile: any member of a room writes what every other member reads. Before it
reaches a terminal (a table, a hint, an error line, a TUI widget):

- C0 controls, DEL and C1 controls (ESC among them) are shown as `\\x1b`-style escapes;
- bidi controls (and lone surrogates, which no terminal can print) as `<U+202E>`-style marks;
- a newline as `⏎` in one line (`line`: a table row, a one-line message); `block` keeps newlines
  and tabs (the TUI's detail pane);
- a backslash is doubled only where it would otherwise read as the start of an escape (before
  `x`, another backslash or an escaped character), so `\\x1b` typed by a person never looks like
  a real ESC;
- nothing else is altered. Text with nothing to show differently is returned as is (one search).

Machine formats (JSON, NDJSON) never go through here: they stay byte-exact.
"""

from __future__ import annotations

import re

NEWLINE_MARK = "⏎"

# Controls shown as \xHH: C0 (but the newline, handled by the mode), DEL and C1.
_CONTROLS = "\x00-\x09\x0b-\x1f\x7f-\x9f"
# Bidi controls (ALM, LRM, RLM, LRE..RLO, LRI..PDI) and lone surrogates, shown as <U+XXXX>.
_MARKED = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# A backslash that an escape could be mistaken for: before `x`, a backslash or a control.
_LINE = re.compile(f"[{_CONTROLS}\n{_MARKED}]|\\\\(?=[x\\\\{_CONTROLS}])")
_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_MARKED}]|\\\\(?=[x\\\\\x00-\x08\x0b-\x1f\x7f-\x9f])")


def _show(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    if char == "\n":
        return NEWLINE_MARK
    code = ord(char)
    if code < 0xA0:
        return f"\\x{code:02x}"
    return f"<U+{code:04X}>"


def line(text: str) -> str:
    """Text as one line a terminal shows literally: controls escaped, bidi marked, a newline as `⏎`."""
    if _LINE.search(text) is None:
        return text
    return _LINE.sub(_show, text)


def block(text: str) -> str:
    """Text over several lines: as `line`, but newlines and tabs are kept."""
    if _BLOCK.search(text) is None:
        return text
    return _BLOCK.sub(_show, text)


def quoted(text: str) -> str:
    """`'text'` in one line, for a message that names a stored value."""
    return f"'{line(text)}'"
