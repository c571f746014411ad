"""The one sanitizer of stored text for a terminal (mnemo_tui/sanitize.py): nothing dangerous out, nothing lost."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_tui import sanitize
from mnemo_tui.sanitize import BIDI_CONTROLS, NEWLINE_MARK

# Every C0 and C1 control, DEL, the escape sequences of terminal attacks, every bidi control.
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
SEQUENCES = [
    "\x1b]0;PWNED\x07",  # OSC 0: the window title
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: the clipboard
    "\x1b[2K",  # CSI 2K: erase the line
    "\x1b[31m",  # SGR: colour the rest
    "\x1b]8;;http://evil\x1b\\",  # OSC 8 hyperlink, ST-terminated
    "\x9b31m",  # CSI as one C1 character
    "\\x1b",  # an escape typed as text
    "\\",
    "x",
    NEWLINE_MARK,
    *CONTROLS,
    *sorted(BIDI_CONTROLS),
]
HOSTILE = st.lists(
    st.one_of(st.text(st.characters(exclude_categories=()), max_size=8), st.sampled_from(SEQUENCES)), max_size=12
).map("".join)


def named(value: str, *, one_line: bool) -> str:
    """The input with the characters the sanitizer names replaced by their marks (the lossy part, by design)."""
    out = []
    for char in value.replace("\r\n", "\n"):  # a Windows line ending is one newline
        if char == "\n" and one_line:
            out.append(NEWLINE_MARK)
        elif char in BIDI_CONTROLS or 0xD800 <= ord(char) <= 0xDFFF:
            out.append(f"<U+{ord(char):04X}>")
        else:
            out.append(char)
    return "".join(out)


def decode(shown: str) -> str:
    """Read the escapes back: `\\\\` is a backslash, `\\xHH` a control, any other backslash itself."""
    out, i = [], 0
    while i < len(shown):
        if shown.startswith("\\\\", i):
            out.append("\\")
            i += 2
        elif shown.startswith("\\x", i):
            out.append(chr(int(shown[i + 2 : i + 4], 16)))
            i += 4
        else:
            out.append(shown[i])
            i += 1
    return "".join(out)


def unsafe(char: str, *, keep: str = "") -> bool:
    return char not in keep and (unicodedata.category(char) in ("Cc", "Cs") or char in BIDI_CONTROLS)


@given(HOSTILE)
def test_one_line_holds_no_control_and_reads_back(value: str) -> None:
    shown = sanitize.line(value)
    assert not [c for c in shown if unsafe(c)]
    # Injective up to the named characters: the escapes read back to the very input.
    assert decode(shown) == named(value, one_line=True)


@given(HOSTILE)
def test_a_block_keeps_newlines_and_tabs_only(value: str) -> None:
    shown = sanitize.block(value)
    assert not [c for c in shown if unsafe(c, keep="\n\t")]
    assert shown.count("\n") == value.count("\n")  # a `\r\n` is one of them
    assert decode(shown) == named(value, one_line=False)


@given(st.text(st.characters(exclude_categories=("Cc", "Cs"), exclude_characters="\\" + "".join(BIDI_CONTROLS))))
def test_text_with_nothing_to_show_differently_is_unchanged(value: str) -> None:
    assert sanitize.line(value) is value
    assert sanitize.block(value) is value


def test_the_forms_a_person_reads() -> None:
    assert sanitize.line("note\x1b]0;PWNED\x07 end") == "note\\x1b]0;PWNED\\x07 end"
    assert sanitize.line("a\nb\tc\x08") == "a⏎b\\x09c\\x08"
    assert sanitize.block("a\nb\tc\x08") == "a\nb\tc\\x08"
    assert sanitize.line("abc\u202edef") == "abc<U+202E>def"
    # A typed `\x1b` and a real ESC stay apart; a path keeps its single backslashes.
    assert sanitize.line("\\x1b") == "\\\\x1b" != sanitize.line("\x1b")
    assert sanitize.line("C:\\Users\\xavier") == "C:\\Users\\\\xavier"
    assert sanitize.quoted("a\nb") == "'a⏎b'"
    # Text written on Windows: each `\r\n` is one line ending; a lone `\r` (it rewrites a line) is shown.
    assert sanitize.block("one\r\ntwo\r\n") == "one\ntwo\n"
    assert sanitize.line("one\r\ntwo\rthree") == "one⏎two\\x0dthree"


def test_a_row_with_nothing_to_escape_costs_one_search(monkeypatch: pytest.MonkeyPatch) -> None:
    # Counted, not timed: one search of each row and no substitution is the whole cost.
    class Counted:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern, self.searches, self.subs = pattern, 0, 0

        def search(self, value: str) -> re.Match[str] | None:
            self.searches += 1
            return self.pattern.search(value)

        def sub(self, show: Callable[[re.Match[str]], str], value: str) -> str:
            self.subs += 1
            return self.pattern.sub(show, value)

    counted = Counted(sanitize._LINE)
    monkeypatch.setattr(sanitize, "_LINE", counted)
    rows = [f"an ordinary entry number {i} with some words in it" for i in range(1_000)]
    assert all(sanitize.line(row) is row for row in rows)
    assert (counted.searches, counted.subs) == (1_000, 0)
    assert sanitize.line("one\nescape") == "one⏎escape" and (counted.searches, counted.subs) == (1_001, 1)
