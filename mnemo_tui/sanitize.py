"""Provides the one sanitizer of text from a store or an endpoint before a person's terminal shows it.

Stored text is hostile: any member of a room writes what every other member reads. Before it
reaches a terminal (a table, a hint, an error line, a TUI widget):

- C0 controls, DEL and C1 controls (ESC among them) are shown as `\\x1b`-style escapes;
- bidi controls (and lone surrogates, which no terminal can print) as `<U+202E>`-style marks;
- a newline as `⏎` in one line (`line`: a table row, a one-line message); `block` keeps newlines
  and tabs (the TUI's detail pane); a `\\r\\n` line ending counts as one newline (text written on
  Windows), a lone `\\r` is a control like any other;
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
_LINE = re.compile(f"\r\n|[{_CONTROLS}\n{_MARKED}]|\\\\(?=[x\\\\{_CONTROLS}])")
_BLOCK = re.compile(f"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f{_MARKED}]|\\\\(?=[x\\\\\x00-\x08\x0b-\x1f\x7f-\x9f])")


def _show(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    if char in ("\n", "\r\n"):
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
    return _BLOCK.sub(_show_block, text)


def _show_block(match: re.Match[str]) -> str:
    return "\n" if match.group() == "\r\n" else _show(match)


def quoted(text: str) -> str:
    """`'text'` in one line, for a message that names a stored value."""
    return f"'{line(text)}'"


def cells(shown: str) -> int:
    """The terminal cells `shown` (text already made safe) takes, never fewer than a terminal draws.

    Wide and full-width characters (CJK, most emoji) take two, combining marks and joiners none,
    a variation selector one (it can turn a narrow symbol into a wide emoji). A joined emoji
    sequence is counted part by part: some terminals draw it as one glyph, some as its parts, and
    counting the parts never lets a row overflow.
    """
    if shown.isascii():
        return len(shown)
    return sum(_cell(ch) for ch in shown)


def clip(shown: str, width: int) -> str:
    """`shown` cut to at most `width` cells, ending in `…` where it was cut (whole characters only)."""
    if cells(shown) <= width:
        return shown
    room, used, end = max(0, width - 1), 0, 0
    for index, ch in enumerate(shown):
        size = _cell(ch)
        if used + size > room:
            break
        used += size
        end = index + 1
    while end < len(shown) and _cell(shown[end]) == 0 and shown[end] not in _JOINERS:
        end += 1  # a combining mark stays with its base
    return shown[:end] + "…" if width >= 1 else ""


def pad(shown: str, width: int) -> str:
    """`shown` followed by spaces up to `width` cells."""
    return shown + " " * max(0, width - cells(shown))


_JOINERS = "\u200d"


def _cell(ch: str) -> int:
    code = ord(ch)
    if code < 0x300:
        return 1
    if 0xFE00 <= code <= 0xFE0F:
        return 1
    import unicodedata

    if ch in _JOINERS or unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
